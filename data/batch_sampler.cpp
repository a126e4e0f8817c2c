#include "data/batch_sampler.h"

#include <algorithm>
#include <utility>

#include "data/blend_spec.h"
#include "framework/error.h"
#include "framework/philox.h"

namespace ternion {

BatchSampler::BatchSampler(std::int64_t seq_len, std::uint64_t seed, std::string stream_name)
    : start_prefix_{0},
      window_prefix_{0},
      seq_len_(seq_len),
      seed_(seed),
      stream_name_(std::move(stream_name)),
      stream_hash_(hash_name(stream_name_)),
      component_hash_(hash_name(stream_name_ + "/component")) {
  TN_CHECK(seq_len >= 1, "seq_len ", seq_len, " must be positive");
}

BatchSampler::BatchSampler(const TokenDataset& dataset, std::int64_t seq_len, std::uint64_t seed,
                           std::string stream_name)
    : BatchSampler(seq_len, seed, std::move(stream_name)) {
  add_component(dataset, 1.0);
}

BatchSampler::BatchSampler(const DataBlend& blend, std::int64_t seq_len, std::uint64_t seed,
                           std::string stream_name)
    : BatchSampler(seq_len, seed, std::move(stream_name)) {
  std::vector<double> weights;
  for (const BlendComponent& c : blend.components()) weights.push_back(c.weight);
  const std::vector<double> bounds = blend_upper_bounds(weights);
  for (std::size_t i = 0; i < bounds.size(); ++i)
    add_component(blend.components()[i].data, bounds[i]);
}

void BatchSampler::add_component(const TokenDataset& data, double upper) {
  const std::int64_t first_start = start_prefix_.back();
  for (const TokenShard& shard : data.shards()) {
    TN_CHECK_AS(DataError, shard.size() >= seq_len_ + 1, "token file '", shard.path(),
                "': ", shard.size(), " tokens, too few for one sequence of seq_len ", seq_len_,
                " (needs seq_len + 1 = ", seq_len_ + 1, ")");
    shards_.push_back(&shard);
    start_prefix_.push_back(start_prefix_.back() + shard.size() - seq_len_);
    window_prefix_.push_back(window_prefix_.back() + (shard.size() - 1) / seq_len_);
  }
  components_.push_back({upper, first_start, start_prefix_.back() - first_start});
}

BatchSampler::Location BatchSampler::locate(const std::vector<std::int64_t>& prefix,
                                            std::int64_t index, std::int64_t per_index) {
  const auto after = std::upper_bound(prefix.begin(), prefix.end(), index);
  const auto shard = static_cast<std::int64_t>(after - prefix.begin()) - 1;
  return {shard, (index - prefix[static_cast<std::size_t>(shard)]) * per_index};
}

std::int64_t BatchSampler::sample_component(std::int64_t step, std::int64_t g) const {
  TN_CHECK(step >= 1, "optimizer steps count from 1, got ", step);
  TN_CHECK(g >= 0, "negative sequence index ", g);
  if (components_.size() == 1) return 0;
  RngStream stream{seed_, mix_stream(component_hash_, static_cast<std::uint64_t>(step))};
  Philox4 r = philox_bits(stream, static_cast<std::uint64_t>(g));
  std::uint64_t bits = (static_cast<std::uint64_t>(r.v[1]) << 32) | r.v[0];
  const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;  // exact, in [0, 1)
  const auto chosen = std::upper_bound(components_.begin(), components_.end(), u,
                                       [](double x, const Component& c) { return x < c.upper; });
  return static_cast<std::int64_t>(chosen - components_.begin());
}

std::int64_t BatchSampler::sample_offset(std::int64_t step, std::int64_t g) const {
  const Component& c = components_[static_cast<std::size_t>(sample_component(step, g))];
  RngStream stream{seed_, mix_stream(stream_hash_, static_cast<std::uint64_t>(step))};
  Philox4 r = philox_bits(stream, static_cast<std::uint64_t>(g));
  std::uint64_t bits = (static_cast<std::uint64_t>(r.v[1]) << 32) | r.v[0];
  return c.first_start +
         static_cast<std::int64_t>(bits % static_cast<std::uint64_t>(c.start_count));
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
    const TokenShard& shard = *shards_[static_cast<std::size_t>(at.shard)];
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
