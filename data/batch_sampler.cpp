#include "data/batch_sampler.h"

#include <algorithm>
#include <utility>

#include "framework/error.h"
#include "framework/philox.h"

namespace ternion {

BatchSampler::BatchSampler(const TokenDataset& dataset, std::int64_t seq_len, std::uint64_t seed,
                           std::string stream_name)
    : dataset_(&dataset),
      seq_len_(seq_len),
      seed_(seed),
      stream_name_(std::move(stream_name)),
      stream_hash_(hash_name(stream_name_)) {
  TN_CHECK(seq_len >= 1, "seq_len ", seq_len, " must be positive");
  start_prefix_.push_back(0);
  window_prefix_.push_back(0);
  for (const TokenShard& shard : dataset.shards()) {
    TN_CHECK_AS(DataError, shard.size() >= seq_len + 1, "token file '", shard.path(), "': ",
                shard.size(), " tokens, too few for one sequence of seq_len ", seq_len,
                " (needs seq_len + 1 = ", seq_len + 1, ")");
    start_prefix_.push_back(start_prefix_.back() + shard.size() - seq_len);
    window_prefix_.push_back(window_prefix_.back() + (shard.size() - 1) / seq_len);
  }
}

BatchSampler::Location BatchSampler::locate(const std::vector<std::int64_t>& prefix,
                                            std::int64_t index, std::int64_t per_index) {
  const auto after = std::upper_bound(prefix.begin(), prefix.end(), index);
  const auto shard = static_cast<std::int64_t>(after - prefix.begin()) - 1;
  return {shard, (index - prefix[static_cast<std::size_t>(shard)]) * per_index};
}

std::int64_t BatchSampler::sample_offset(std::int64_t step, std::int64_t g) const {
  TN_CHECK(step >= 1, "optimizer steps count from 1, got ", step);
  TN_CHECK(g >= 0, "negative sequence index ", g);
  RngStream stream{seed_, mix_stream(stream_hash_, static_cast<std::uint64_t>(step))};
  Philox4 r = philox_bits(stream, static_cast<std::uint64_t>(g));
  std::uint64_t bits = (static_cast<std::uint64_t>(r.v[1]) << 32) | r.v[0];
  auto start_count = static_cast<std::uint64_t>(start_prefix_.back());
  return static_cast<std::int64_t>(bits % start_count);
}

template <class LocationOf>
TokenBatch BatchSampler::gather(std::int64_t count, LocationOf location_of) const {
  TN_CHECK(count >= 0, "negative sequence count ", count);
  TokenBatch batch{Tensor::empty({count, seq_len_}, DType::I32),
                   Tensor::empty({count, seq_len_}, DType::I32)};
  std::int32_t* inputs = batch.inputs.data<std::int32_t>();
  std::int32_t* targets = batch.targets.data<std::int32_t>();
  for (std::int64_t i = 0; i < count; ++i) {
    const Location at = location_of(i);
    const TokenShard& shard = dataset_->shards()[static_cast<std::size_t>(at.shard)];
    shard.copy_tokens(at.offset, seq_len_, inputs + i * seq_len_);
    shard.copy_tokens(at.offset + 1, seq_len_, targets + i * seq_len_);
  }
  return batch;
}

TokenBatch BatchSampler::sample(std::int64_t step, std::int64_t first, std::int64_t count) const {
  TN_CHECK(first >= 0, "negative first sequence ", first);
  return gather(count, [&](std::int64_t i) {
    return locate(start_prefix_, sample_offset(step, first + i), 1);
  });
}

TokenBatch BatchSampler::sequential(std::int64_t first, std::int64_t count) const {
  TN_CHECK(first >= 0, "negative first window ", first);
  const std::int64_t windows = window_count();
  return gather(count, [&](std::int64_t i) {
    return locate(window_prefix_, (first + i) % windows, seq_len_);
  });
}

}  // namespace ternion
