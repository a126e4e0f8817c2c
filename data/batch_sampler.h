// BatchSampler: training and validation batches from a TokenDataset (one or more shards), or
// for training from a DataBlend (several datasets, each with a weight: data/data_blend.h).
//
// A sequence is a window of seq_len + 1 consecutive tokens w[0..seq_len] of one shard:
//   inputs  = w[0 .. seq_len - 1]      // i32 [count, seq_len]
//   targets = w[1 .. seq_len]          // i32 [count, seq_len], inputs shifted by one token
//
// Window starts are numbered across the shards in order: shard k holds size_k - seq_len of
// them, so start j of the dataset is start j - (starts of shards 0..k-1) of shard k. A window
// never spans two shards (shards are separate texts).
//
// Training (`sample`): sequence g (its index in the step's *global* batch) of optimizer step s
// (1-based) begins at dataset start
//   start(s, g) = bits64(philox_bits({seed, mix_stream(hash_name(stream_name), s)}, g))
//                 mod (total starts)
// a pure function of (seed, stream name, step, g). So any split of the global batch into
// (first, count) pieces — data-parallel ranks, micro-batches — yields exactly the sequences one
// rank would have drawn for the whole batch, and a resumed run draws what it would have drawn.
// With one shard the start is the offset in it, as for a single file. (The modulo bias is below
// (starts / 2^64), far below anything training can notice.)
//
// A blend of datasets 0..n-1 of weights w_0..w_{n-1} (summing to 1) first picks dataset c for
// sequence g of step s: the first with u < w_0 + ... + w_c, where u is the top 53 bits of
//   bits64(philox_bits({seed, mix_stream(hash_name(stream_name + "/component"), s)}, g)) / 2^53
// and then draws start(s, g) above among dataset c's starts alone: still a pure function of
// (seed, stream name, step, g). Starts are numbered across the datasets in order, dataset c's
// after those of the datasets before it. A blend of one dataset draws no u, so it reads
// exactly as that dataset alone.
//
// Validation (`sequential`): shard k holds W_k = (size_k - 1) / seq_len whole non-overlapping
// windows, at offsets 0, seq_len, ...; window g is window (g mod W) of the shards in order,
// W = sum W_k, so a fixed range of g is a fixed validation set.
//
// The sampler keeps pointers to the shards: the dataset or blend must outlive the sampler and
// not be moved while the sampler is in use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/data_blend.h"
#include "data/token_dataset.h"
#include "framework/tensor.h"

namespace ternion {

struct TokenBatch {
  Tensor inputs;   // i32 [count, seq_len]
  Tensor targets;  // i32 [count, seq_len]
};

class BatchSampler {
 public:
  // Throws DataError naming the file if a shard holds fewer than seq_len + 1 tokens (it
  // could give no sequence: make shards longer, or seq_len shorter).
  BatchSampler(const TokenDataset& dataset, std::int64_t seq_len, std::uint64_t seed,
               std::string stream_name);
  BatchSampler(const DataBlend& blend, std::int64_t seq_len, std::uint64_t seed,
               std::string stream_name);

  // Global sequences [first, first + count) of optimizer step `step` (step >= 1).
  TokenBatch sample(std::int64_t step, std::int64_t first, std::int64_t count) const;
  // Non-overlapping windows g = first .. first + count - 1, wrapping after window_count().
  TokenBatch sequential(std::int64_t first, std::int64_t count) const;

  // The blend's dataset (its index) that global sequence g of step `step` is drawn from; 0
  // for a TokenDataset or a blend of one.
  std::int64_t sample_component(std::int64_t step, std::int64_t g) const;
  // The start (see above) of global sequence g of step `step`, numbered across the blend's
  // datasets; with one shard, its offset in the shard.
  std::int64_t sample_offset(std::int64_t step, std::int64_t g) const;
  // The number of whole non-overlapping windows `sequential` cycles through.
  std::int64_t window_count() const { return window_prefix_.back(); }

  std::int64_t seq_len() const { return seq_len_; }
  const std::string& stream_name() const { return stream_name_; }

 private:
  // A blend's dataset: its starts [first_start, first_start + start_count), drawn while
  // u < upper (its cumulative weight).
  struct Component {
    double upper;
    std::int64_t first_start;
    std::int64_t start_count;
  };
  struct Location {
    std::int64_t shard;
    std::int64_t offset;
  };
  // Shard k owns indices [prefix[k], prefix[k + 1]); `per_index` tokens apart within it.
  static Location locate(const std::vector<std::int64_t>& prefix, std::int64_t index,
                         std::int64_t per_index);
  BatchSampler(std::int64_t seq_len, std::uint64_t seed, std::string stream_name);  // no data
  // Copies the windows starting at location_of(i), i = 0 .. count - 1, into a batch.
  template <class LocationOf>
  TokenBatch gather(std::int64_t count, LocationOf location_of) const;
  // Appends `data`'s shards as the next component, drawn while u < `upper`.
  void add_component(const TokenDataset& data, double upper);

  std::vector<const TokenShard*> shards_;  // every dataset's, in order
  std::vector<Component> components_;
  std::vector<std::int64_t> start_prefix_;   // training starts before each shard, and the total
  std::vector<std::int64_t> window_prefix_;  // validation windows likewise
  std::int64_t seq_len_;
  std::uint64_t seed_;
  std::string stream_name_;
  std::uint64_t stream_hash_;     // hash_name(stream_name_), computed once
  std::uint64_t component_hash_;  // hash_name(stream_name_ + "/component")
};

}  // namespace ternion
