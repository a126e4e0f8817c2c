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

// Each Philox call gives four elements their bits: the global indices are cut into blocks of
// kDropoutBlock = 64, and element i of block k takes lane (i % 64) / 16 of call
// 16 k + i % 16. So a quarter of a call per element, and a CPU loop over a block's 16 calls
// (vector lanes) stores each of the four lanes' 16 elements contiguously.
inline constexpr std::uint64_t kDropoutBlock = 64;
inline constexpr std::uint64_t kDropoutCallsPerBlock = kDropoutBlock / 4;

// Kept when the lane's 24-bit uniform (philox_uniform's map) is at least p.
TN_HOST_DEVICE inline bool dropout_keep_bits(std::uint32_t bits, float p) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f) >= p;
}

TN_HOST_DEVICE inline bool dropout_keep(RngStream stream, std::uint64_t global_index, float p) {
  const std::uint64_t within = global_index % kDropoutBlock;
  const std::uint64_t call = global_index / kDropoutBlock * kDropoutCallsPerBlock +
                             within % kDropoutCallsPerBlock;
  return dropout_keep_bits(philox_bits(stream, call).v[within / kDropoutCallsPerBlock], p);
}

// Kept elements are scaled by 1 / (1 - p) so the expected output equals the input.
template <class T>
TN_HOST_DEVICE inline T dropout_scale(float p) {
  return static_cast<T>(1) / (static_cast<T>(1) - static_cast<T>(p));
}

}  // namespace ternion
