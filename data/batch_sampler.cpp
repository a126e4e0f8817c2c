#include "data/batch_sampler.h"

#include <utility>

#include "framework/error.h"
#include "framework/philox.h"

namespace ternion {

BatchSampler::BatchSampler(const TokenShard& shard, std::int64_t seq_len, std::uint64_t seed,
                           std::string stream_name)
    : shard_(&shard),
      seq_len_(seq_len),
      seed_(seed),
      stream_name_(std::move(stream_name)),
      stream_hash_(hash_name(stream_name_)) {
  TN_CHECK(seq_len >= 1, "seq_len ", seq_len, " must be positive");
  TN_CHECK_AS(DataError, shard.size() >= seq_len + 1, "token file '", shard.path(), "': ",
              shard.size(), " tokens, too few for one sequence of seq_len ", seq_len,
              " (needs seq_len + 1 = ", seq_len + 1, ")");
}

std::int64_t BatchSampler::sample_offset(std::int64_t step, std::int64_t g) const {
  TN_CHECK(step >= 1, "optimizer steps count from 1, got ", step);
  TN_CHECK(g >= 0, "negative sequence index ", g);
  RngStream stream{seed_, mix_stream(stream_hash_, static_cast<std::uint64_t>(step))};
  Philox4 r = philox_bits(stream, static_cast<std::uint64_t>(g));
  std::uint64_t bits = (static_cast<std::uint64_t>(r.v[1]) << 32) | r.v[0];
  auto start_count = static_cast<std::uint64_t>(shard_->size() - seq_len_);
  return static_cast<std::int64_t>(bits % start_count);
}

template <class OffsetOf>
TokenBatch BatchSampler::gather(std::int64_t count, OffsetOf offset_of) const {
  TN_CHECK(count >= 0, "negative sequence count ", count);
  TokenBatch batch{Tensor::empty({count, seq_len_}, DType::I32),
                   Tensor::empty({count, seq_len_}, DType::I32)};
  std::int32_t* inputs = batch.inputs.data<std::int32_t>();
  std::int32_t* targets = batch.targets.data<std::int32_t>();
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t offset = offset_of(i);
    shard_->copy_tokens(offset, seq_len_, inputs + i * seq_len_);
    shard_->copy_tokens(offset + 1, seq_len_, targets + i * seq_len_);
  }
  return batch;
}

TokenBatch BatchSampler::sample(std::int64_t step, std::int64_t first, std::int64_t count) const {
  TN_CHECK(first >= 0, "negative first sequence ", first);
  return gather(count, [&](std::int64_t i) { return sample_offset(step, first + i); });
}

TokenBatch BatchSampler::sequential(std::int64_t first, std::int64_t count) const {
  TN_CHECK(first >= 0, "negative first window ", first);
  const std::int64_t windows = window_count();
  return gather(count, [&](std::int64_t i) { return ((first + i) % windows) * seq_len_; });
}

}  // namespace ternion
