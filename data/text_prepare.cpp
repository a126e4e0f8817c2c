#include "data/text_prepare.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <regex>
#include <span>
#include <system_error>

#include "data/decompress.h"
#include "data/token_shard.h"
#include "framework/error.h"

namespace ternion {

namespace fs = std::filesystem;

namespace {

void check_options(const PrepareOptions& options) {
  TN_CHECK_AS(UsageError, options.val_fraction >= 0.0 && options.val_fraction <= 0.5,
              "val_fraction ", options.val_fraction, " is outside [0, 0.5]");
  TN_CHECK_AS(UsageError, options.shard_tokens >= 0, "shard_tokens ", options.shard_tokens,
              " is negative");
  TN_CHECK_AS(UsageError, options.threads >= 1, "threads ", options.threads, " is below 1");
}

// One file to write: `tokens` under `path` (first as path + ".new").
struct PlannedFile {
  std::string path;
  std::span<const std::int32_t> tokens;
};

// The files of one split: "<split>.bin" whole, or the fewest shards of at most shard_tokens
// tokens, their sizes within one token of each other.
void plan_split(const fs::path& dir, const std::string& split, std::span<const std::int32_t> tokens,
                std::int64_t shard_tokens, std::vector<PlannedFile>& files) {
  const auto total = static_cast<std::int64_t>(tokens.size());
  if (shard_tokens == 0) {
    files.push_back({(dir / (split + ".bin")).string(), tokens});
    return;
  }
  const std::int64_t shards = (total + shard_tokens - 1) / shard_tokens;
  // Six digits keep the names in order, as the sampler reads them.
  TN_CHECK_AS(UsageError, shards <= 999999, "shard_tokens ", shard_tokens, " would split ",
              total, " tokens into ", shards, " shards, more than the 999999 names allow");
  std::int64_t begin = 0;
  for (std::int64_t k = 0; k < shards; ++k) {
    const std::int64_t end = total * (k + 1) / shards;
    char name[32];
    std::snprintf(name, sizeof name, "%s_%06lld.bin", split.c_str(), static_cast<long long>(k));
    files.push_back({(dir / name).string(),
                     tokens.subspan(static_cast<std::size_t>(begin),
                                    static_cast<std::size_t>(end - begin))});
    begin = end;
  }
}

// A name a preparation writes, or leaves behind when it dies half-way (.new and temporary
// files).
bool is_preparation_name(const std::string& name) {
  static const std::regex ours(
      R"(((train|val)(_[0-9]{6})?\.bin|tokenizer\.json)(\.new)?(\.tmp\.[0-9]+)?)");
  return std::regex_match(name, ours);
}

// What earlier preparations may have left in `dir` that this one did not write.
std::vector<fs::path> stale_files(const fs::path& dir, const std::vector<std::string>& written) {
  std::vector<fs::path> stale;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!is_preparation_name(name)) continue;
    if (std::find(written.begin(), written.end(), it->path().string()) == written.end())
      stale.push_back(it->path());
  }
  if (error)
    TN_THROW(DataError, "cannot list '", dir.string(), "' for files of an earlier preparation: ",
             error.message());
  return stale;
}

// `source` names the text in messages: "text file 'x.txt'" or "the text".
PrepareResult split_and_write(std::string_view text, const std::string& source,
                              const std::string& output_dir, const PrepareOptions& options) {
  check_options(options);
  TN_CHECK_AS(DataError, !text.empty(), source, " is empty: nothing to prepare");
  const Tokenizer& tokenizer = options.tokenizer;
  if (!tokenizer.is_bytes()) {
    const std::int64_t bad = first_invalid_utf8(text);
    TN_CHECK_AS(DataError, bad < 0, source, " is not UTF-8 at byte offset ", bad,
                ": a BPE tokenizer encodes UTF-8 text (convert it, e.g. with iconv, or "
                "prepare it as bytes)");
  }
  const auto encode_start = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> tokens = tokenizer.encode(text, options.threads);
  const std::chrono::duration<double> encode_time = std::chrono::steady_clock::now() - encode_start;
  return prepare_tokens(tokens, output_dir, options, source, encode_time.count());
}

// Where the validation split of documents begins: the document start nearest `cut` (the later
// of two as near) among those that leave validation at most half of the tokens, as a
// val_fraction is at most 0.5 (so training keeps the first document, at least).
std::int64_t document_cut(std::span<const std::int32_t> tokens, std::int64_t cut,
                          std::int32_t start, const std::string& source) {
  const auto total = static_cast<std::int64_t>(tokens.size());
  const std::int64_t first = total - total / 2;  // the earliest start allowed
  std::int64_t before = cut, after = cut;
  while (before >= first && tokens[static_cast<std::size_t>(before)] != start) --before;
  while (after < total && tokens[static_cast<std::size_t>(after)] != start) ++after;
  TN_CHECK_AS(DataError, before >= first || after < total, source,
              ": no document starts in the last half of the tokens, and the validation split "
              "takes whole documents (use more documents, or a val_fraction of 0)");
  if (before < first) return after;
  if (after == total) return before;
  return cut - before < after - cut ? before : after;
}

}  // namespace

PrepareResult prepare_tokens(std::span<const std::int32_t> tokens, const std::string& output_dir,
                             const PrepareOptions& options, const std::string& source,
                             double encode_seconds) {
  check_options(options);
  const Tokenizer& tokenizer = options.tokenizer;
  const auto total = static_cast<std::int64_t>(tokens.size());
  TN_CHECK_AS(DataError, total > 0, source,
              ": no tokens: the tokenizer has no token for any of "
              "its bytes");
  const auto val_tokens =
      static_cast<std::int64_t>(static_cast<double>(total) * options.val_fraction);
  TN_CHECK_AS(DataError, options.val_fraction == 0.0 || val_tokens > 0, source, ": only ", total,
              tokenizer.is_bytes() ? " bytes" : " tokens",
              ", too few for a validation fraction of ", options.val_fraction,
              " (the split would get none); use more text or a val_fraction of 0");

  std::error_code error;
  fs::create_directories(output_dir, error);
  if (error) TN_THROW(DataError, "cannot create output directory '", output_dir, "': ",
                      error.message());
  TN_CHECK_AS(DataError, fs::is_directory(output_dir), "output path '", output_dir,
              "' exists and is not a directory");

  const fs::path dir(output_dir);
  const std::span<const std::int32_t> all = tokens;
  std::int64_t train_tokens = total - val_tokens;
  std::int64_t val_documents = 0;
  if (options.document_start >= 0 && val_tokens > 0) {
    train_tokens = document_cut(all, train_tokens, options.document_start, source);
    val_documents = std::count(all.begin() + train_tokens, all.end(), options.document_start);
  }
  std::vector<PlannedFile> files;
  plan_split(dir, "train", all.first(static_cast<std::size_t>(train_tokens)),
             options.shard_tokens, files);
  const std::size_t train_count = files.size();
  if (val_tokens > 0)
    plan_split(dir, "val", all.subspan(static_cast<std::size_t>(train_tokens)),
               options.shard_tokens, files);
  const TokenWidth width = tokenizer.vocab_size() <= 65536 ? TokenWidth::U16 : TokenWidth::U32;
  const std::string tokenizer_path = (dir / "tokenizer.json").string();

  // Everything under new names first, so a failure leaves the old preparation whole.
  std::vector<std::string> written;
  try {
    for (const PlannedFile& file : files) {
      written.push_back(file.path);
      write_token_file(file.path + ".new", file.tokens, width);
    }
    if (const BpeTokenizer* bpe = tokenizer.bpe()) {
      written.push_back(tokenizer_path);
      bpe->save(tokenizer_path + ".new");
    }
  } catch (const DataError&) {
    for (const std::string& path : written) fs::remove(path + ".new", error);
    throw;
  }
  for (const std::string& path : written) {
    fs::rename(path + ".new", path, error);
    if (error) TN_THROW(DataError, "cannot replace '", path, "': ", error.message());
  }
  for (const fs::path& path : stale_files(dir, written)) {
    fs::remove(path, error);
    if (error) TN_THROW(DataError, "cannot remove stale '", path.string(), "': ", error.message());
  }

  PrepareResult result{train_tokens, total - train_tokens, val_documents, {}, {}, encode_seconds};
  for (std::size_t i = 0; i < files.size(); ++i)
    (i < train_count ? result.train_files : result.val_files).push_back(files[i].path);
  return result;
}

std::string read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) TN_THROW(DataError, "text file '", path, "': cannot open: ", std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string reason = std::strerror(errno);
      ::close(fd);
      TN_THROW(DataError, "text file '", path, "': cannot read: ", reason);
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return decompress(std::move(text), "text file '" + path + "'");
}

PrepareResult prepare_text(std::string_view text, const std::string& output_dir,
                           const PrepareOptions& options, const std::string& source) {
  return split_and_write(text, source, output_dir, options);
}

bool is_replaced_by_preparation(const std::string& path, const std::string& output_dir) {
  std::error_code error;
  const fs::path file = fs::weakly_canonical(path, error);
  if (error) return false;
  const fs::path dir = fs::weakly_canonical(output_dir, error);
  return !error && file.parent_path() == dir && is_preparation_name(file.filename().string());
}

PrepareResult prepare_text_file(const std::string& input_path, const std::string& output_dir,
                                const PrepareOptions& options) {
  check_options(options);  // before reading a possibly large file
  TN_CHECK_AS(DataError, !is_replaced_by_preparation(input_path, output_dir), "text file '",
              input_path, "' is one that preparing into '", output_dir, "' replaces or removes");
  const std::string text = read_text_file(input_path);
  return split_and_write(text, "text file '" + input_path + "'", output_dir, options);
}

}  // namespace ternion
