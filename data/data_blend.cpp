#include "data/data_blend.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "data/blend_spec.h"
#include "framework/error.h"

namespace ternion {

namespace {

// Refuses a file (by device and inode: the same file under any name) in two components.
void refuse_shared_files(const std::string& key, const std::vector<BlendComponent>& components) {
  std::map<std::pair<dev_t, ino_t>, std::size_t> owner;  // file -> the first part holding it
  for (std::size_t c = 0; c < components.size(); ++c)
    for (const TokenShard& shard : components[c].data.shards()) {
      struct stat info {};
      if (::stat(shard.path().c_str(), &info) != 0) continue;  // gone since opened: no match
      const auto [at, first] = owner.try_emplace({info.st_dev, info.st_ino}, c);
      TN_CHECK_AS(DataError, first || at->second == c, key, ": the file '", shard.path(),
                  "' is in two components of the blend, '", components[at->second].path, "' and '",
                  components[c].path, "': give each file one weight");
    }
}

}  // namespace

DataBlend DataBlend::open(const std::string& key, const std::string& spec) {
  std::vector<BlendComponent> components;
  for (const BlendPart& part : parse_blend_spec(key, spec).parts)
    components.push_back({part.weight, part.path, TokenDataset::open(key, part.path)});
  refuse_shared_files(key, components);
  const TokenShard& first = components.front().data.shards().front();
  for (const BlendComponent& c : components) {
    const TokenShard& shard = c.data.shards().front();
    TN_CHECK_AS(DataError, shard.width() == first.width(), key, ": '", c.path, "' holds ",
                token_width_name(shard.width()), " tokens but '", components.front().path,
                "' holds ", token_width_name(first.width()),
                ": the datasets come from different tokenizers");
  }
  return DataBlend(std::move(components));
}

DataBlend::DataBlend(std::vector<BlendComponent> components) : components_(std::move(components)) {
  TN_CHECK(!components_.empty(), "a blend needs at least one dataset");
  double sum = 0;
  for (const BlendComponent& c : components_) {
    TN_CHECK(c.weight > 0 && std::isfinite(c.weight), c.data.name(), ": weight ", c.weight,
             " is not positive and finite");
    sum += c.weight;
  }
  TN_CHECK(std::fabs(sum - 1) < 1e-9, "a blend's weights sum to ", sum, ", not 1");
}

std::int64_t DataBlend::token_count() const {
  std::int64_t total = 0;
  for (const BlendComponent& c : components_) total += c.data.token_count();
  return total;
}

std::vector<std::string> DataBlend::paths() const {
  std::vector<std::string> out;
  for (const BlendComponent& c : components_)
    for (std::string& path : c.data.paths()) out.push_back(std::move(path));
  return out;
}

std::uint32_t DataBlend::max_token() const {
  std::uint32_t largest = 0;
  for (const BlendComponent& c : components_) largest = std::max(largest, c.data.max_token());
  return largest;
}

TokenDataset open_unweighted(const std::string& key, const std::string& spec) {
  // Anything else is a path, spaces and all: a missing one is named as data.train's would be.
  TN_CHECK_AS(DataError, !looks_like_a_blend(spec), key, " '", spec,
              "': weights are for data.train: ", key,
              " is read in order, window after window: name one file, directory or glob");
  return TokenDataset::open(key, spec);
}

void refuse_shared_shards(const DataBlend& train, const TokenDataset& val) {
  for (const BlendComponent& c : train.components()) refuse_shared_shards(c.data, val);
}

}  // namespace ternion
