// RMSNorm on CUDA: the CPU op's math (kernels/cpu/rms_norm.cpp, contract in kernels/rms_norm.h)
// with one warp per row, 16-byte vector access where the row allows.
//
//   forward   rstd = 1 / sqrt(sum(x^2) / C + eps)   (F32);  out = x * rstd * weight
//   backward  dweight[c] += sum_r dout[r,c] xhat[r,c],  xhat = x * rstd
//             dx = rstd * (dnorm - xhat * mean(dnorm * xhat)),  dnorm = dout * weight
//             (dx overwritten; dweight accumulates); with a residual gradient, dx is rounded to
//             its dtype, then the residual added and the sum rounded, as the CPU's
//             rms_norm_backward + accumulate
//
// dtypes: x, out, dout, dx, weight all F32 or all BF16; rstd, dweight F32. Every sum is F32.
//
// The weight gradient is column_sums.cuh's deterministic reduction (fixed row chunks, no float
// atomics) of dout * xhat, run before the dx kernel, so dx may alias dout as on the CPU.
#include <cstdint>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda {

namespace {

using i64 = std::int64_t;

constexpr int kWarpSize = 32;
constexpr int kThreadsPerBlock = 256;
constexpr int kRowsPerBlock = kThreadsPerBlock / kWarpSize;  // one warp per row

using detail::from_float;
using detail::load_vec;
using detail::to_float;

__device__ inline float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  return value;
}

// Warp w of block b normalises row b * kRowsPerBlock + w; its lanes stride over the columns,
// N adjacent ones at a time (N = kVecWidth where the row length and pointers allow). out may
// alias x: each element is read by the lane that later writes it.
template <int N, class Elem>
__global__ void __launch_bounds__(kThreadsPerBlock)
    rms_norm_forward_kernel(Elem* out, float* rstd, const Elem* x, const Elem* weight, i64 rows,
                            int cols, float eps) {
  const i64 row = static_cast<i64>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles stay full
  const Elem* xr = x + row * cols;
  float squares = 0.0f;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto xv = load_vec<N>(xr + c);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float v = to_float(xv.v[k]);
      squares += v * v;
    }
  }
  // IEEE sqrt and division, as the CPU: rstd then differs only by the order of the sum.
  const float s = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(cols) + eps);
  Elem* outr = out + row * cols;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto xv = load_vec<N>(xr + c);
    const auto wv = load_vec<N>(weight + c);
    detail::Vec<Elem, N> ov;
#pragma unroll
    for (int k = 0; k < N; ++k)
      ov.v[k] = from_float<Elem>(to_float(xv.v[k]) * s * to_float(wv.v[k]));
    detail::store_vec<N>(outr + c, ov);
  }
  if (lane == 0) rstd[row] = s;
}

// dout * xhat at flat indices [i, i + N), for column_sums.cuh: with N > 1, cols is a multiple
// of N and i of N, so the N values share one row.
template <class Elem>
struct WeightGradientTerms {
  const Elem* dout;
  const Elem* x;
  const float* rstd;
  long long cols;
  template <int N>
  __device__ detail::Vec<float, N> load(long long i) const {
    const float s = rstd[i / cols];
    const auto dv = load_vec<N>(dout + i);
    const auto xv = load_vec<N>(x + i);
    detail::Vec<float, N> terms;
#pragma unroll
    for (int k = 0; k < N; ++k) terms.v[k] = to_float(dv.v[k]) * (to_float(xv.v[k]) * s);
    return terms;
  }
};

// One warp per row, N columns at a time, as the forward. dx may alias dout: the row's sum is
// complete before any lane writes, and each lane writes only the elements it read. residual
// (may be null) is added after dx is rounded (__fadd_rn: never contracted with the product into
// one fused multiply-add, which would skip the rounding a separate accumulate performs).
template <int N, class Elem>
__global__ void __launch_bounds__(kThreadsPerBlock)
    rms_norm_dx_kernel(Elem* dx, const Elem* dout, const Elem* x, const Elem* weight,
                       const float* rstd, const Elem* residual, i64 rows, int cols) {
  const i64 row = static_cast<i64>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (row >= rows) return;
  const Elem* xr = x + row * cols;
  const Elem* dr = dout + row * cols;
  const float s = rstd[row];
  float sum_dnorm_xhat = 0.0f;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto dv = load_vec<N>(dr + c);
    const auto wv = load_vec<N>(weight + c);
    const auto xv = load_vec<N>(xr + c);
#pragma unroll
    for (int k = 0; k < N; ++k)
      sum_dnorm_xhat += to_float(dv.v[k]) * to_float(wv.v[k]) * (to_float(xv.v[k]) * s);
  }
  const float mean_dnorm_xhat = warp_sum(sum_dnorm_xhat) / static_cast<float>(cols);
  Elem* dxr = dx + row * cols;
  const Elem* residual_row = residual != nullptr ? residual + row * cols : nullptr;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto dv = load_vec<N>(dr + c);
    const auto wv = load_vec<N>(weight + c);
    const auto xv = load_vec<N>(xr + c);
    detail::Vec<Elem, N> out;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float xhat = to_float(xv.v[k]) * s;
      out.v[k] = from_float<Elem>(
          (to_float(dv.v[k]) * to_float(wv.v[k]) - xhat * mean_dnorm_xhat) * s);
    }
    if (residual_row != nullptr) {
      const auto rv = load_vec<N>(residual_row + c);
#pragma unroll
      for (int k = 0; k < N; ++k)
        out.v[k] = from_float<Elem>(__fadd_rn(to_float(out.v[k]), to_float(rv.v[k])));
    }
    detail::store_vec<N>(dxr + c, out);
  }
}

int checked_cols(const Tensor& x) {
  // The lanes' column index steps by up to 32 x kVecWidth past the last column.
  TN_CHECK(x.size(-1) <= 0x7FFFFFFF - kWarpSize * detail::kVecWidth, "rms_norm (cuda): ",
           x.size(-1), " columns exceed 32-bit indexing");
  return static_cast<int>(x.size(-1));
}

unsigned row_blocks(i64 rows) {
  const i64 blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  TN_CHECK(blocks <= 0x7FFFFFFF, "rms_norm (cuda): ", rows, " rows exceed the grid");
  return static_cast<unsigned>(blocks);
}

template <class Elem>
void forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& weight, float eps) {
  const int cols = checked_cols(x);
  const i64 rows = x.numel() / cols;
  if (rows == 0) return;
  const int width =
      detail::vector_width(cols, out.data<Elem>(), x.data<Elem>(), weight.data<Elem>());
  detail::with_vector_width(width, [&](auto n) {
    rms_norm_forward_kernel<decltype(n)::value, Elem>
        <<<row_blocks(rows), kThreadsPerBlock, 0, compute_stream()>>>(
            out.data<Elem>(), rstd.data<float>(), x.data<Elem>(), weight.data<Elem>(), rows,
            cols, eps);
    TN_CUDA_CHECK_LAUNCH();
  });
}

template <class Elem>
void backward(Tensor& dx, Tensor& dweight, const Tensor& dout, const Tensor& x,
              const Tensor& weight, const Tensor& rstd, const Tensor* residual) {
  const int cols = checked_cols(x);
  const i64 rows = x.numel() / cols;
  if (rows == 0) return;  // nothing to add to dweight; dx is empty
  // The weight gradient first: it reads dout before the dx kernel may overwrite it.
  detail::sum_columns(
      dweight,
      WeightGradientTerms<Elem>{dout.data<Elem>(), x.data<Elem>(), rstd.data<float>(), cols},
      rows, cols, detail::vector_width(cols, dout.data<Elem>(), x.data<Elem>()));
  const Elem* residual_data = residual != nullptr ? residual->data<Elem>() : nullptr;
  // A null residual counts as aligned: vector access needs only the tensors there are.
  const int width = detail::vector_width(cols, dx.data<Elem>(), dout.data<Elem>(),
                                         x.data<Elem>(), weight.data<Elem>(), residual_data);
  detail::with_vector_width(width, [&](auto n) {
    rms_norm_dx_kernel<decltype(n)::value, Elem>
        <<<row_blocks(rows), kThreadsPerBlock, 0, compute_stream()>>>(
            dx.data<Elem>(), dout.data<Elem>(), x.data<Elem>(), weight.data<Elem>(),
            rstd.data<float>(), residual_data, rows, cols);
    TN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void rms_norm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& weight,
                      float eps) {
  if (x.dtype() == DType::BF16) {
    forward<BFloat16>(out, rstd, x, weight, eps);
  } else {
    forward<float>(out, rstd, x, weight, eps);
  }
}

void rms_norm_backward(Tensor& dx, Tensor& dweight, const Tensor& dout, const Tensor& x,
                       const Tensor& weight, const Tensor& rstd, const Tensor* residual) {
  if (x.dtype() == DType::BF16) {
    backward<BFloat16>(dx, dweight, dout, x, weight, rstd, residual);
  } else {
    backward<float>(dx, dweight, dout, x, weight, rstd, residual);
  }
}

}  // namespace ternion::cuda
