// TokenDataset: the token files of one split (data.train or data.val), as an ordered list of
// shards (data/token_shard.h).
//
// `open(key, spec)` takes what the config names:
//   a token file                     that file alone;
//   a directory                      every regular file in it named *.bin, in name order (not
//                                    one holding both train*.bin and val*.bin files, as
//                                    ternion-prepare writes, or names with a part train and
//                                    val between _, - or ., as llm.c's: the splits would mix);
//   a glob pattern (* ? [...])       the files it matches, in name order (glob(3)) (not both
//                                    splits, either);
// and opens every shard at once, so a bad header anywhere stops the run before the first step.
// Refused with one DataError line naming `key` and the file: a path that does not exist, a
// directory without .bin files, a pattern matching nothing, a shard the reader refuses, and
// shards of different token widths (uint16 and uint32 files mixed: they come from different
// tokenizers).
//
// Shard order is part of the data: samplers number windows across the shards in this order
// (data/batch_sampler.h), so renaming shards changes which sequences a step draws.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/token_shard.h"

namespace ternion {

class TokenDataset {
 public:
  static TokenDataset open(const std::string& key, const std::string& spec);
  // Shards already open, in order; `name` says what they are in messages. At least one.
  TokenDataset(std::string name, std::vector<TokenShard> shards);

  std::span<const TokenShard> shards() const { return shards_; }
  const std::string& name() const { return name_; }
  std::int64_t token_count() const;  // over all shards
  std::vector<std::string> paths() const;  // the shards' files, in order
  // The largest token of any shard (each shard scans itself once).
  std::uint32_t max_token() const;

 private:
  std::string name_;  // "data.train 'dir/train_*.bin'"
  std::vector<TokenShard> shards_;
};

// Refuses (DataError, naming both) a file that is a shard of both `train` and `val` (the same
// file under any name): validation would measure text the model trains on.
void refuse_shared_shards(const TokenDataset& train, const TokenDataset& val);

}  // namespace ternion
