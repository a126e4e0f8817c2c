// What the elementwise CUDA kernels (bias_add, gelu, elementwise, convert, adamw) share: F32
// math on F32 or BF16 storage, and the grid of a grid-stride loop.
//
// BF16 values convert as framework/bfloat16.h's functions, which the CPU staging uses, so
// "load as float, compute, round to bf16" gives the CPU's bits whenever the F32 math does.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "framework/bfloat16.h"
#include "framework/dtype.h"
#include "framework/error.h"

namespace ternion::cuda::detail {

constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 65535;  // grid-stride loops cover the rest

// Blocks for n elements at one element per thread, capped (the kernels loop over the rest).
inline unsigned blocks_for(long long n) {
  return static_cast<unsigned>(std::max(1LL, std::min((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(BFloat16 x) { return bf16_to_float(x); }

// To BF16 with the hardware's round-to-nearest-even conversion (one instruction where the
// shared software rounding takes about eight): the same bits as float_to_bf16 for every number
// and infinity; a NaN stays a NaN, though not necessarily with the same payload.
template <class Elem>
__device__ inline Elem from_float(float x) {
  if constexpr (std::is_same_v<Elem, float>) {
    return x;
  } else {
    return BFloat16{__bfloat16_as_ushort(__float2bfloat16_rn(x))};
  }
}

// The first index of this thread and the stride of a grid-stride loop, in 64 bits.
__device__ inline long long grid_start() {
  return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline long long grid_stride() {
  return static_cast<long long>(gridDim.x) * blockDim.x;
}

// Calls f(float{}) or f(BFloat16{}) for a float dtype, so one launcher serves both.
template <class F>
void dispatch_float_dtype(DType dtype, const char* op, F&& f) {
  if (dtype == DType::F32) {
    f(float{});
  } else if (dtype == DType::BF16) {
    f(BFloat16{});
  } else {
    TN_THROW(InternalError, op, " (cuda): no kernel for ", dtype_name(dtype));
  }
}

}  // namespace ternion::cuda::detail
