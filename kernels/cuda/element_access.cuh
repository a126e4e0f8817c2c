// What the elementwise CUDA kernels (bias_add, gelu, elementwise, convert, adamw, layer_norm)
// share: F32 math on F32 or BF16 storage, the grid of a grid-stride loop, and vector access.
//
// BF16 values convert as framework/bfloat16.h's functions, which the CPU staging uses, so
// "load as float, compute, round to bf16" gives the CPU's bits whenever the F32 math does.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
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

// N consecutive elements loaded or stored as one: with N = kVecWidth, one 16-byte access for
// BF16 (two for F32), which keep far more bytes in flight per instruction than 2- or 4-byte
// ones, so a memory-bound kernel gets near the bandwidth; with N = 1, one element. An access
// at p needs p aligned to N elements (vector_width checks the base pointers on the host; the
// kernels only step by multiples of N from them). The 16-byte accesses go through the cache
// intrinsics (__ldca, __stwb: the default caching), which always emit one vector
// instruction: a plain int4 store of values also used afterwards was split by nvcc into
// 4-byte stores once it lost track of the address's alignment. Values move through
// memcpy and explicit packing, never by reading one type through another's pointer.
constexpr int kVecWidth = 8;

template <class Elem, int N>
struct alignas(N * sizeof(Elem)) Vec {
  Elem v[N];
};

template <int N, class Elem>
__device__ inline Vec<Elem, N> load_vec(const Elem* p) {
  Vec<Elem, N> out;
  if constexpr (N * sizeof(Elem) % 16 == 0) {
#pragma unroll
    for (int k = 0; k < static_cast<int>(N * sizeof(Elem) / 16); ++k) {
      const int4 chunk = __ldca(reinterpret_cast<const int4*>(p) + k);
      __builtin_memcpy(reinterpret_cast<char*>(out.v) + 16 * k, &chunk, 16);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) out.v[k] = p[k];
  }
  return out;
}

template <int N, class Elem>
__device__ inline void store_vec(Elem* p, const Vec<Elem, N>& value) {
  if constexpr (std::is_same_v<Elem, BFloat16> && N % 8 == 0) {
    // The 16-bit values packed into 32-bit words by hand: where the values are also used after
    // the store, nvcc otherwise splits a copied struct into 4-byte or narrower stores.
#pragma unroll
    for (int k = 0; k < N / 8; ++k) {
      unsigned words[4];
#pragma unroll
      for (int w = 0; w < 4; ++w)
        words[w] = static_cast<unsigned>(value.v[8 * k + 2 * w].bits) |
                   (static_cast<unsigned>(value.v[8 * k + 2 * w + 1].bits) << 16);
      __stwb(reinterpret_cast<int4*>(p) + k,
             make_int4(static_cast<int>(words[0]), static_cast<int>(words[1]),
                       static_cast<int>(words[2]), static_cast<int>(words[3])));
    }
  } else if constexpr (std::is_same_v<Elem, float> && N % 4 == 0) {
#pragma unroll
    for (int k = 0; k < N / 4; ++k)
      __stwb(reinterpret_cast<float4*>(p) + k, make_float4(value.v[4 * k], value.v[4 * k + 1],
                                                           value.v[4 * k + 2], value.v[4 * k + 3]));
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = value.v[k];
  }
}

// kVecWidth if `count` (elements, or a row's columns) is a multiple of it and every pointer is
// aligned to kVecWidth of its own elements; else 1. Tensors from the caching allocator are
// 256-byte aligned, so views at odd offsets and odd sizes are what take the narrow path.
template <class... T>
int vector_width(long long count, const T*... pointers) {
  const bool aligned =
      ((reinterpret_cast<std::uintptr_t>(pointers) % (kVecWidth * sizeof(T)) == 0) && ...);
  return count % kVecWidth == 0 && aligned ? kVecWidth : 1;
}

// Calls f(std::integral_constant<int, W>{}) for W = width (kVecWidth or 1), so a launcher can
// pick a kernel's compile-time vector width from vector_width's answer.
template <class F>
void with_vector_width(int width, F&& f) {
  if (width == kVecWidth) {
    f(std::integral_constant<int, kVecWidth>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
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
