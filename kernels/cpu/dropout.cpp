// Inverted dropout; the mask is regenerated from the counter-based RNG in both directions
// (kernels/dropout_math.h), one (sample, position) row of channels per iteration; within a row
// the loop over a block's Philox calls vectorises, rounds included, each call giving eight
// elements (on AVX2 without AVX-512DQ, the calls by intrinsics first: philox_avx2.h).
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/philox_avx2.h"
#include "kernels/dropout_math.h"

// AVX2 without AVX-512DQ's 64-bit multiply: Philox by intrinsics (philox_avx2.h).
#if defined(__AVX2__) && !defined(__AVX512DQ__)
#define TN_DROPOUT_PHILOX_X8 1
#else
#define TN_DROPOUT_PHILOX_X8 0
#endif

namespace ternion::cpu {

namespace {

constexpr i64 kMinParallelElements = 1 << 14;

// out = mask * in * scale (kernels/dropout_math.h); out may alias in. Forward and backward are
// the same map.
template <class T>
void apply_dropout_mask(T* out, const T* in, float p, RngStream stream, i64 batch, i64 seq,
                        i64 channels, i64 sample_offset, i64 seq_offset, i64 seq_total) {
  const i64 n = batch * seq * channels;
  if (p == 0.0f) {  // an exact copy, without spending the RNG
    if (out != in) std::copy(in, in + n, out);
    return;
  }
  const std::uint32_t threshold = dropout_threshold(p);
  const T scale = dropout_scale<T>(threshold);
#if !TN_DROPOUT_PHILOX_X8
  // Philox's multipliers, read through volatile so that they are not constants in the vector
  // loop: GCC would turn a vector multiply by a constant into shifts and adds on AVX2, which
  // has no 64-bit vector multiply (1.3x slower than the widening multiply it keeps here).
  const volatile std::uint32_t multipliers[2] = {kPhiloxMul0, kPhiloxMul1};
  const std::uint32_t mul0 = multipliers[0], mul1 = multipliers[1];
#endif
#pragma omp parallel for collapse(2) schedule(static) if (n >= kMinParallelElements)
  for (i64 b = 0; b < batch; ++b) {
    for (i64 t = 0; t < seq; ++t) {
      const std::uint64_t first =
          dropout_global_index(sample_offset + b, seq_offset + t, seq_total, channels, 0);
      const T* x = in + (b * seq + t) * channels;
      T* y = out + (b * seq + t) * channels;
      // Elements one by one up to the first whole block of 128 (kernels/dropout_math.h), then
      // block by block, each a vector loop over its 16 Philox calls, then the rest one by one.
      const auto keep_one = [&](i64 c) {
        y[c] = dropout_keep(stream, first + static_cast<std::uint64_t>(c), threshold)
                   ? x[c] * scale
                   : static_cast<T>(0);
      };
      const i64 head = std::min<i64>(
          channels, static_cast<i64>((kDropoutBlock - first % kDropoutBlock) % kDropoutBlock));
      for (i64 c = 0; c < head; ++c) keep_one(c);
      const i64 blocks = (channels - head) / static_cast<i64>(kDropoutBlock);
      for (i64 k = 0; k < blocks; ++k) {
        const i64 c0 = head + k * static_cast<i64>(kDropoutBlock);
        const std::uint64_t call0 =
            (first + static_cast<std::uint64_t>(c0)) / kDropoutBlock * kDropoutCallsPerBlock;
        const T* xb = x + c0;
        T* yb = y + c0;
        constexpr i64 kCalls = static_cast<i64>(kDropoutCallsPerBlock);
        const T zero = static_cast<T>(0);
#if TN_DROPOUT_PHILOX_X8
        // The block's calls first (philox_avx2.h), then the elements from their words.
        alignas(32) std::uint32_t words[4 * kCalls];
        for (i64 j = 0; j < kCalls; j += 8)
          philox_bits_x8(stream, call0 + static_cast<std::uint64_t>(j), words + j, kCalls);
#pragma omp simd
        for (i64 j = 0; j < kCalls; ++j) {
          for (int w = 0; w < 4; ++w) {  // halves 2w and 2w + 1 (dropout_half_bits)
            const std::uint32_t word = words[w * kCalls + j];
            const i64 low = 2 * w * kCalls + j, high = low + kCalls;
            yb[low] = (word & 0xFFFFu) >= threshold ? xb[low] * scale : zero;
            yb[high] = (word >> 16) >= threshold ? xb[high] * scale : zero;
          }
        }
#else
#pragma omp simd
        for (i64 j = 0; j < kCalls; ++j) {
          const Philox4 r =
              philox_bits_wide(stream, call0 + static_cast<std::uint64_t>(j), mul0, mul1);
          // Half h of the call (dropout_half_bits) for element h * kCalls + j, written out so
          // that the loop vectorises.
          yb[j] = (r.v[0] & 0xFFFFu) >= threshold ? xb[j] * scale : zero;
          yb[kCalls + j] = (r.v[0] >> 16) >= threshold ? xb[kCalls + j] * scale : zero;
          yb[2 * kCalls + j] = (r.v[1] & 0xFFFFu) >= threshold ? xb[2 * kCalls + j] * scale : zero;
          yb[3 * kCalls + j] = (r.v[1] >> 16) >= threshold ? xb[3 * kCalls + j] * scale : zero;
          yb[4 * kCalls + j] = (r.v[2] & 0xFFFFu) >= threshold ? xb[4 * kCalls + j] * scale : zero;
          yb[5 * kCalls + j] = (r.v[2] >> 16) >= threshold ? xb[5 * kCalls + j] * scale : zero;
          yb[6 * kCalls + j] = (r.v[3] & 0xFFFFu) >= threshold ? xb[6 * kCalls + j] * scale : zero;
          yb[7 * kCalls + j] = (r.v[3] >> 16) >= threshold ? xb[7 * kCalls + j] * scale : zero;
        }
#endif
      }
      for (i64 c = head + blocks * static_cast<i64>(kDropoutBlock); c < channels; ++c) keep_one(c);
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
