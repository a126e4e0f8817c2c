#include "layers/kv_cache.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "framework/error.h"
#include "kernels/vector_math.h"

namespace ternion {

void KvCache::advance(std::int64_t rows) {
  TN_CHECK(positions_ + rows <= capacity_, rows, " positions after ", positions_, " of ",
           capacity_);
  positions_ += rows;
}

Tensor KvCache::attend(const void* owner, const Tensor& packed, std::int64_t heads,
                       std::int64_t queries_per_kv) {
  TN_CHECK(packed.device().is_cpu() && packed.dtype() == DType::F32 && packed.is_contiguous() &&
               packed.dim() == 3 && packed.size(0) == 1 && heads % queries_per_kv == 0 &&
               packed.size(2) % (3 * heads) == 0,
           "KvCache::attend: packed ", packed.str(), " for ", heads, " heads, ", queries_per_kv,
           " per key/value head (one sequence, CPU, f32)");
  const std::int64_t rows = packed.size(1), hs = packed.size(2) / (3 * heads);
  const std::int64_t kv_heads = heads / queries_per_kv, row_stride = 3 * heads * hs;
  TN_CHECK(positions_ + rows <= capacity_, "the KV cache holds ", capacity_, " positions; ",
           rows, " more after ", positions_, " do not fit");
  Slot& slot = slots_[owner];
  if (!slot.keys.defined()) {
    slot.keys = Tensor::zeros({kv_heads, capacity_, hs});
    slot.values = Tensor::zeros({kv_heads, capacity_, hs});
  }
  const float* src = packed.data<float>();
  float* keys = slot.keys.data<float>();
  float* values = slot.values.data<float>();
  const std::size_t bytes = static_cast<std::size_t>(hs) * sizeof(float);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < kv_heads; ++g) {
      const float* head = src + r * row_stride + g * queries_per_kv * 3 * hs;  // [q | k | v]
      const std::int64_t at = (g * capacity_ + positions_ + r) * hs;
      std::memcpy(keys + at, head + hs, bytes);
      std::memcpy(values + at, head + 2 * hs, bytes);
    }

  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  Tensor attended = Tensor::empty({1, rows, heads * hs});
  std::vector<float> probs(static_cast<std::size_t>(capacity_));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t last = positions_ + r;  // causal: keys [0, last]
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* q = src + r * row_stride + h * 3 * hs;
      const std::int64_t g = h / queries_per_kv;
      const float* head_keys = keys + g * capacity_ * hs;
      const float* head_values = values + g * capacity_ * hs;
      // The attention kernel's steps (kernels/cpu/attention.cpp): scaled scores, softmax less
      // the maximum, normalised probabilities, then the weighted sum of the values.
      float max_score = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j <= last; ++j) {
        float dot = 0.0f;
        for (std::int64_t d = 0; d < hs; ++d) dot += q[d] * head_keys[j * hs + d];
        probs[j] = dot * scale;
        max_score = std::max(max_score, probs[j]);
      }
      float sum = 0.0f;
      for (std::int64_t j = 0; j <= last; ++j) {
        probs[j] = fast_exp_bounded(probs[j] - max_score);
        sum += probs[j];
      }
      const float inv_sum = 1.0f / sum;
      float* out = attended.data<float>() + r * heads * hs + h * hs;
      for (std::int64_t d = 0; d < hs; ++d) out[d] = 0.0f;
      for (std::int64_t j = 0; j <= last; ++j) {
        const float p = probs[j] * inv_sum;
        for (std::int64_t d = 0; d < hs; ++d) out[d] += p * head_values[j * hs + d];
      }
    }
  }
  return attended;
}

}  // namespace ternion
