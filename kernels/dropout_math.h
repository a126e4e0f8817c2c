// Dropout's keep test and scale, shared by the CPU loop and the CUDA kernel (see
// kernels/dropout.h for why the index is the element's index in the global tensor).
#pragma once

#include <cstdint>

#include "framework/features.h"
#include "framework/philox.h"

namespace ternion {

// Index of element (sample, position, channel) of the global [B_global, T_global, C] tensor.
TN_HOST_DEVICE inline std::uint64_t dropout_global_index(std::int64_t sample, std::int64_t position,
                                                         std::int64_t seq_total,
                                                         std::int64_t channels,
                                                         std::int64_t channel) {
  return static_cast<std::uint64_t>((sample * seq_total + position) * channels + channel);
}

// Each Philox call gives eight elements their bits, 16 each: the global indices are cut into
// blocks of kDropoutBlock = 128, and element i of block k takes the 16-bit half
// (i % 128) / 16 of call 16 k + i % 16 (halves 2w and 2w + 1 are the low and high bits of
// the call's word w). So an eighth of a call per element, and a CPU loop over a block's 16
// calls (vector lanes) stores each half's 16 elements contiguously. The generator, not
// memory, bounds dropout on a CPU: 16 bits an element take half the calls that 32 would.
inline constexpr std::uint64_t kDropoutBlock = 128;
inline constexpr std::uint64_t kDropoutCallsPerBlock = 16;

// p in units of 2^-16, the keep test's resolution: an element is dropped with probability
// dropout_threshold(p) / 65536, p to the nearest 1/65536 (at most 65535 of them, so that
// something is kept and the scale stays finite).
TN_HOST_DEVICE inline std::uint32_t dropout_threshold(float p) {
  const float units = p * 65536.0f + 0.5f;
  return units >= 65535.0f ? 65535u : static_cast<std::uint32_t>(units);
}

// Half `half` (0..7) of a Philox call's four words.
TN_HOST_DEVICE inline std::uint32_t dropout_half_bits(const Philox4& r, int half) {
  return (r.v[half / 2] >> (16 * (half % 2))) & 0xFFFFu;
}

TN_HOST_DEVICE inline bool dropout_keep(RngStream stream, std::uint64_t global_index,
                                        std::uint32_t threshold) {
  const std::uint64_t within = global_index % kDropoutBlock;
  const std::uint64_t call = global_index / kDropoutBlock * kDropoutCallsPerBlock +
                             within % kDropoutCallsPerBlock;
  const int half = static_cast<int>(within / kDropoutCallsPerBlock);
  return dropout_half_bits(philox_bits(stream, call), half) >= threshold;
}

// Kept elements are scaled by 65536 / (65536 - threshold), the inverse of the probability of
// keeping one, so that the expected output equals the input exactly.
template <class T>
TN_HOST_DEVICE inline T dropout_scale(std::uint32_t threshold) {
  return static_cast<T>(65536) / static_cast<T>(65536u - threshold);
}

}  // namespace ternion
