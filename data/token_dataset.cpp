#include "data/token_dataset.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "framework/error.h"

namespace ternion {

namespace fs = std::filesystem;

namespace {

bool is_pattern(const std::string& spec) {
  return spec.find_first_of("*?[") != std::string::npos;
}

// Whether a file's name marks it as of `split` ("train" or "val"): ternion-prepare's names
// start with it (train.bin, val_000001.bin), llm.c's hold it as a part (tiny_train.bin,
// fineweb_val_000000.bin).
bool is_of_split(const std::string& name, const std::string& split) {
  if (name.rfind(split, 0) == 0) return true;
  auto separates = [](char c) { return c == '_' || c == '-' || c == '.'; };
  for (std::size_t at = name.find(split); at != std::string::npos; at = name.find(split, at + 1)) {
    const std::size_t end = at + split.size();
    if (at > 0 && separates(name[at - 1]) && (end == name.size() || separates(name[end])))
      return true;
  }
  return false;
}

// ternion-prepare (and llm.c) write both splits into one directory `dir`: taking all of its
// files would train on the validation text. `spec` (a directory, "holds"; a glob, "matches")
// names them.
void refuse_mixed_splits(const std::string& key, const std::string& spec, const char* verb,
                         const fs::path& dir, const std::vector<std::string>& paths) {
  const std::string split = key == "data.val" ? "val" : "train";
  bool train = false, val = false, prefixed = true;
  for (const std::string& path : paths) {
    const std::string name = fs::path(path).filename().string();
    train = train || is_of_split(name, "train");
    val = val || is_of_split(name, "val");
    if (is_of_split(name, split)) prefixed = prefixed && name.rfind(split, 0) == 0;
  }
  const std::string glob = (prefixed ? "" : "*") + split + "*.bin";
  TN_CHECK_AS(DataError, !(train && val), key, " '", spec, "' ", verb,
              " both training (named train*.bin, or with a part 'train' between _, - or .) and "
              "validation (val*.bin, or a part 'val') files: name one split with a glob, e.g. ",
              (dir / glob).string());
}

std::vector<std::string> directory_shards(const std::string& key, const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code not_a_file;  // a dangling link is not a shard; TokenShard::open would say so
    if (it->path().extension() != ".bin" || !it->is_regular_file(not_a_file)) continue;
    paths.push_back(it->path().string());
  }
  if (error) TN_THROW(DataError, key, " '", dir, "': cannot list the directory: ", error.message());
  TN_CHECK_AS(DataError, !paths.empty(), key, " '", dir,
              "' is a directory without token files (*.bin)");
  refuse_mixed_splits(key, dir, "holds", dir, paths);
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::vector<std::string> glob_shards(const std::string& key, const std::string& pattern) {
  glob_t matches{};
  const int status = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &matches);
  std::vector<std::string> paths(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  TN_CHECK_AS(DataError, status != GLOB_NOMATCH, key, " '", pattern, "' matches no file");
  TN_CHECK_AS(DataError, status == 0, key, " '", pattern,
              "': cannot read a directory the pattern names");
  refuse_mixed_splits(key, pattern, "matches", fs::path(pattern).parent_path(), paths);
  std::sort(paths.begin(), paths.end());  // glob sorts by the locale's collation; we by bytes
  return paths;
}

std::vector<std::string> shard_paths(const std::string& key, const std::string& spec) {
  TN_CHECK_AS(DataError, !spec.empty(), key, " is empty: name a token file, a directory of them "
              "or a glob pattern");
  std::error_code error;
  if (fs::is_directory(spec, error)) return directory_shards(key, spec);
  if (fs::exists(spec, error) || !is_pattern(spec)) return {spec};  // TokenShard::open explains
  return glob_shards(key, spec);
}

}  // namespace

TokenDataset TokenDataset::open(const std::string& key, const std::string& spec) {
  std::vector<TokenShard> shards;
  for (const std::string& path : shard_paths(key, spec)) {
    try {
      shards.push_back(TokenShard::open(path));
    } catch (const DataError& e) {
      TN_THROW(DataError, key, ": ", e.what());
    }
  }
  return TokenDataset(key + " '" + spec + "'", std::move(shards));
}

TokenDataset::TokenDataset(std::string name, std::vector<TokenShard> shards)
    : name_(std::move(name)), shards_(std::move(shards)) {
  TN_CHECK(!shards_.empty(), name_, ": a dataset needs at least one shard");
  for (const TokenShard& shard : shards_) {
    TN_CHECK_AS(DataError, shard.width() == shards_.front().width(), name_, ": shard '",
                shard.path(), "' holds ", token_width_name(shard.width()), " tokens but '",
                shards_.front().path(), "' holds ", token_width_name(shards_.front().width()),
                ": the shards come from different tokenizers");
  }
}

std::int64_t TokenDataset::token_count() const {
  std::int64_t total = 0;
  for (const TokenShard& shard : shards_) total += shard.size();
  return total;
}

std::vector<std::string> TokenDataset::paths() const {
  std::vector<std::string> out;
  for (const TokenShard& shard : shards_) out.push_back(shard.path());
  return out;
}

void refuse_shared_shards(const TokenDataset& train, const TokenDataset& val) {
  for (const TokenShard& v : val.shards())
    for (const TokenShard& t : train.shards()) {
      std::error_code error;  // a file gone since it was opened: not the same file
      if (!fs::equivalent(v.path(), t.path(), error)) continue;
      const std::string same = v.path() == t.path() ? "" : " (the file '" + t.path() + "')";
      TN_THROW(DataError, val.name(), ": '", v.path(), "' is also a file of ", train.name(), same,
               ": validation would measure text the model trains on");
    }
}

std::uint32_t TokenDataset::max_token() const {
  std::uint32_t largest = 0;
  for (const TokenShard& shard : shards_) largest = std::max(largest, shard.max_token());
  return largest;
}

}  // namespace ternion
