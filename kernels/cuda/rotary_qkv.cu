// Rotary position embedding and grouped-query packing on CUDA: the CPU op's math
// (kernels/cpu/rotary_qkv.cpp, contract in kernels/rotary_qkv.h), one thread per pair
// (j, j + hs/2) of one head's output.
//
//   forward   thread (row, head h, part, j), part 0 q, 1 k, 2 v of packed: reads the pair of
//             query h % r, key or value of group h / r in grouped, turns q and k, copies v
//   backward  thread (row, group g, slot, j), slot < r a query, r the key, r + 1 the value of
//             dgrouped: a query's pair turned back; the key's and value's pairs summed over the
//             group's r heads in head order (the CPU's order, no atomics), the key's turned back
//
// The inverse frequencies are computed on the host by rotary_inv_freq, as the CPU op does, and
// reach the kernel as a __grid_constant__ argument (read in place, no per-thread copy), so both
// devices turn by the same f32 angles; device powf differs from the host's by a few ulps, which
// a long position's angle would multiply. dtypes: F32 or BF16, math in F32.
#include <cstdint>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/rotary_qkv_math.h"

namespace ternion::cuda {

namespace {

using i64 = std::int64_t;
using detail::from_float;
using detail::to_float;

constexpr i64 kMaxHalf = 256;  // head size 512; 1 KiB of kernel argument

struct InvFreq {
  float values[kMaxHalf];
};

struct RotaryDims {
  i64 rows, seq, kv_heads, queries_per_kv, head_size, first_position;
};

template <class Elem>
__global__ void rotary_qkv_forward_kernel(Elem* packed, const Elem* grouped, RotaryDims d,
                                          const __grid_constant__ InvFreq inv_freq) {
  const i64 r = d.queries_per_kv, half = d.head_size / 2, heads = d.kv_heads * r;
  const i64 n_pairs = d.rows * heads * 3 * half;
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 n = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; n < n_pairs;
       n += stride) {
    const i64 j = n % half;
    i64 rest = n / half;
    const i64 part = rest % 3;
    rest /= 3;
    const i64 h = rest % heads, row = rest / heads;
    const i64 g = h / r;
    const i64 slot = part == 0 ? h % r : r + part - 1;  // query h % r, the key r, the value r + 1
    const Elem* x = grouped + ((row * d.kv_heads + g) * (r + 2) + slot) * d.head_size;
    Elem* y = packed + ((row * heads + h) * 3 + part) * d.head_size;
    if (part == 2) {
      y[j] = x[j];
      y[j + half] = x[j + half];
    } else {
      float c, s, y0, y1;
      rotary_cos_sin(rotary_angle(d.first_position + row % d.seq, inv_freq.values[j]), c, s);
      rotary_rotate_pair(to_float(x[j]), to_float(x[j + half]), c, s, y0, y1);
      y[j] = from_float<Elem>(y0);
      y[j + half] = from_float<Elem>(y1);
    }
  }
}

template <class Elem>
__global__ void rotary_qkv_backward_kernel(Elem* dgrouped, const Elem* dpacked, RotaryDims d,
                                           const __grid_constant__ InvFreq inv_freq) {
  const i64 r = d.queries_per_kv, half = d.head_size / 2, slots = r + 2;
  const i64 n_pairs = d.rows * d.kv_heads * slots * half;
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 n = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; n < n_pairs;
       n += stride) {
    const i64 j = n % half;
    i64 rest = n / half;
    const i64 slot = rest % slots;
    rest /= slots;
    const i64 g = rest % d.kv_heads, row = rest / d.kv_heads;
    // The group's first head in dpacked; head i's part p starts (3 i + p) hs further on.
    const Elem* heads = dpacked + (row * d.kv_heads + g) * r * 3 * d.head_size;
    float x0, x1;
    if (slot < r) {
      const Elem* dq = heads + slot * 3 * d.head_size;
      x0 = to_float(dq[j]);
      x1 = to_float(dq[j + half]);
    } else {
      const i64 part = slot - r + 1;  // 1 the keys, 2 the values
      x0 = 0.0f;
      x1 = 0.0f;
      for (i64 i = 0; i < r; ++i) {
        const Elem* d_part = heads + (i * 3 + part) * d.head_size;
        x0 += to_float(d_part[j]);
        x1 += to_float(d_part[j + half]);
      }
    }
    if (slot <= r) {  // queries and the key turn back; the value does not turn
      float c, s;
      rotary_cos_sin(rotary_angle(d.first_position + row % d.seq, inv_freq.values[j]), c, s);
      rotary_rotate_pair(x0, x1, c, -s, x0, x1);
    }
    Elem* y = dgrouped + ((row * d.kv_heads + g) * slots + slot) * d.head_size;
    y[j] = from_float<Elem>(x0);
    y[j + half] = from_float<Elem>(x1);
  }
}

// The launch's dimensions and inverse frequencies for `grouped`'s shape.
RotaryDims rotary_dims(const Tensor& grouped, i64 kv_heads, i64 queries_per_kv,
                       i64 first_position, const RotaryParameters& rope, const char* op,
                       InvFreq& inv_freq) {
  const i64 head_size = grouped.size(2) / (kv_heads * (queries_per_kv + 2));
  TN_CHECK(head_size / 2 <= kMaxHalf, op, " (cuda): head size ", head_size, " exceeds ",
           2 * kMaxHalf);
  for (i64 i = 0; i < head_size / 2; ++i)
    inv_freq.values[i] = rotary_inv_freq(i, head_size, rope);
  return {grouped.size(0) * grouped.size(1), grouped.size(1), kv_heads, queries_per_kv,
          head_size, first_position};
}

template <class Elem>
void forward(Tensor& packed, const Tensor& grouped, const RotaryDims& d, const InvFreq& inv_freq) {
  const i64 n_pairs = packed.numel() / 2;
  rotary_qkv_forward_kernel<Elem><<<detail::blocks_for(n_pairs), detail::kThreads, 0,
                                    compute_stream()>>>(packed.data<Elem>(),
                                                        grouped.data<Elem>(), d, inv_freq);
  TN_CUDA_CHECK_LAUNCH();
}

template <class Elem>
void backward(Tensor& dgrouped, const Tensor& dpacked, const RotaryDims& d,
              const InvFreq& inv_freq) {
  const i64 n_pairs = dgrouped.numel() / 2;
  rotary_qkv_backward_kernel<Elem><<<detail::blocks_for(n_pairs), detail::kThreads, 0,
                                     compute_stream()>>>(dgrouped.data<Elem>(),
                                                         dpacked.data<Elem>(), d, inv_freq);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rotary_qkv_forward(Tensor& packed, const Tensor& grouped, std::int64_t kv_heads,
                        std::int64_t queries_per_kv, std::int64_t first_position,
                        const RotaryParameters& rope) {
  if (packed.numel() == 0) return;
  InvFreq inv_freq{};
  const RotaryDims d = rotary_dims(grouped, kv_heads, queries_per_kv, first_position, rope,
                                   "rotary_qkv_forward", inv_freq);
  if (grouped.dtype() == DType::BF16) {
    forward<BFloat16>(packed, grouped, d, inv_freq);
  } else {
    forward<float>(packed, grouped, d, inv_freq);
  }
}

void rotary_qkv_backward(Tensor& dgrouped, const Tensor& dpacked, std::int64_t kv_heads,
                         std::int64_t queries_per_kv, std::int64_t first_position,
                         const RotaryParameters& rope) {
  if (dgrouped.numel() == 0) return;
  InvFreq inv_freq{};
  const RotaryDims d = rotary_dims(dgrouped, kv_heads, queries_per_kv, first_position, rope,
                                   "rotary_qkv_backward", inv_freq);
  if (dpacked.dtype() == DType::BF16) {
    backward<BFloat16>(dgrouped, dpacked, d, inv_freq);
  } else {
    backward<float>(dgrouped, dpacked, d, inv_freq);
  }
}

}  // namespace ternion::cuda
