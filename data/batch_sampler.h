// BatchSampler: training and validation batches from one TokenShard.
//
// A sequence is a window of seq_len + 1 consecutive tokens w[0..seq_len]:
//   inputs  = w[0 .. seq_len - 1]      // i32 [count, seq_len]
//   targets = w[1 .. seq_len]          // i32 [count, seq_len], inputs shifted by one token
//
// Training (`sample`): sequence g (its index in the step's *global* batch) of optimizer step s
// (1-based) starts at
//   offset(s, g) = bits64(philox_bits({seed, mix_stream(hash_name(stream_name), s)}, g))
//                  mod (size - seq_len)                       // in [0, size - seq_len - 1]
// a pure function of (seed, stream name, step, g). So any split of the global batch into
// (first, count) pieces — data-parallel ranks, micro-batches — yields exactly the sequences one
// rank would have drawn for the whole batch, and a resumed run draws what it would have drawn.
// (The modulo bias is below (size / 2^64), far below anything training can notice.)
//
// Validation (`sequential`): window g starts at (g mod W) * seq_len, W = (size - 1) / seq_len
// the number of whole non-overlapping windows, so a fixed range of g is a fixed validation set.
//
// The sampler keeps a pointer to the shard: the shard must outlive it and must not be moved
// while the sampler is in use (a moved-from shard is empty).
#pragma once

#include <cstdint>
#include <string>

#include "data/token_shard.h"
#include "framework/tensor.h"

namespace ternion {

struct TokenBatch {
  Tensor inputs;   // i32 [count, seq_len]
  Tensor targets;  // i32 [count, seq_len]
};

class BatchSampler {
 public:
  // Throws DataError naming the file if the shard holds fewer than seq_len + 1 tokens.
  BatchSampler(const TokenShard& shard, std::int64_t seq_len, std::uint64_t seed,
               std::string stream_name);

  // Global sequences [first, first + count) of optimizer step `step` (step >= 1).
  TokenBatch sample(std::int64_t step, std::int64_t first, std::int64_t count) const;
  // Non-overlapping windows g = first .. first + count - 1, wrapping after window_count().
  TokenBatch sequential(std::int64_t first, std::int64_t count) const;

  // Where global sequence g of step `step` starts in the shard.
  std::int64_t sample_offset(std::int64_t step, std::int64_t g) const;
  // The number of whole non-overlapping windows `sequential` cycles through.
  std::int64_t window_count() const { return (shard_->size() - 1) / seq_len_; }

  std::int64_t seq_len() const { return seq_len_; }
  const TokenShard& shard() const { return *shard_; }
  const std::string& stream_name() const { return stream_name_; }

 private:
  // Copies the windows starting at offset_of(i), i = 0 .. count - 1, into a batch.
  template <class OffsetOf>
  TokenBatch gather(std::int64_t count, OffsetOf offset_of) const;

  const TokenShard* shard_;
  std::int64_t seq_len_;
  std::uint64_t seed_;
  std::string stream_name_;
  std::uint64_t stream_hash_;  // hash_name(stream_name_), computed once
};

}  // namespace ternion
