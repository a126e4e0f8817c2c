// Inverted dropout; the mask is regenerated from the counter-based RNG in both directions
// (kernels/dropout_math.h), one (sample, position) row of channels per iteration so the
// channel loop vectorises, Philox rounds included.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dropout_math.h"

namespace ternion::cpu {

namespace {

constexpr i64 kMinParallelElements = 1 << 14;

// out = mask * in / (1 - p); out may alias in. Forward and backward are the same map.
template <class T>
void apply_dropout_mask(T* out, const T* in, float p, RngStream stream, i64 batch, i64 seq,
                        i64 channels, i64 sample_offset, i64 seq_offset, i64 seq_total) {
  const i64 n = batch * seq * channels;
  if (p == 0.0f) {  // an exact copy, without spending the RNG
    if (out != in) std::copy(in, in + n, out);
    return;
  }
  const T scale = dropout_scale<T>(p);
#pragma omp parallel for collapse(2) schedule(static) if (n >= kMinParallelElements)
  for (i64 b = 0; b < batch; ++b) {
    for (i64 t = 0; t < seq; ++t) {
      const std::uint64_t first =
          dropout_global_index(sample_offset + b, seq_offset + t, seq_total, channels, 0);
      const T* x = in + (b * seq + t) * channels;
      T* y = out + (b * seq + t) * channels;
      #pragma omp simd
      for (i64 c = 0; c < channels; ++c) {
        const bool keep = dropout_keep(stream, first + static_cast<std::uint64_t>(c), p);
        y[c] = keep ? x[c] * scale : static_cast<T>(0);
      }
    }
  }
}

}  // namespace

template <class T>
void dropout_forward(T* out, const T* x, float p, RngStream stream, i64 batch, i64 seq,
                     i64 channels, i64 sample_offset, i64 seq_offset, i64 seq_total) {
  apply_dropout_mask(out, x, p, stream, batch, seq, channels, sample_offset, seq_offset, seq_total);
}

template <class T>
void dropout_backward(T* dx, const T* dout, float p, RngStream stream, i64 batch, i64 seq,
                      i64 channels, i64 sample_offset, i64 seq_offset, i64 seq_total) {
  apply_dropout_mask(dx, dout, p, stream, batch, seq, channels, sample_offset, seq_offset,
                     seq_total);
}

template void dropout_forward<float>(float*, const float*, float, RngStream, i64, i64, i64, i64,
                                     i64, i64);
template void dropout_forward<double>(double*, const double*, float, RngStream, i64, i64, i64, i64,
                                      i64, i64);
template void dropout_backward<float>(float*, const float*, float, RngStream, i64, i64, i64, i64,
                                      i64, i64);
template void dropout_backward<double>(double*, const double*, float, RngStream, i64, i64, i64, i64,
                                       i64, i64);

}  // namespace ternion::cpu
