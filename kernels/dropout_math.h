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

TN_HOST_DEVICE inline bool dropout_keep(RngStream stream, std::uint64_t global_index, float p) {
  return philox_uniform(stream, global_index) >= p;
}

// Kept elements are scaled by 1 / (1 - p) so the expected output equals the input.
template <class T>
TN_HOST_DEVICE inline T dropout_scale(float p) {
  return static_cast<T>(1) / (static_cast<T>(1) - static_cast<T>(p));
}

}  // namespace ternion
