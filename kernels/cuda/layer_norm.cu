// LayerNorm on CUDA: the CPU op's math (kernels/cpu/layer_norm.cpp, contract in
// kernels/layer_norm.h) with one warp per row, 16-byte vector access where the row allows.
//
//   forward   mean = sum(x) / C, rstd = 1 / sqrt(sum((x - mean)^2) / C + eps)   (two passes, F32)
//             out  = (x - mean) * rstd * weight + bias
//   backward  dweight[c] += sum_r dout[r,c] xhat[r,c],  dbias[c] += sum_r dout[r,c]
//             dx = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)),  dnorm = dout * weight
//             (dx overwritten; dweight and dbias accumulate); with a residual gradient, dx is
//             rounded to its dtype, then the residual added and the sum rounded, as the CPU's
//             layer_norm_backward + accumulate
//
// dtypes: x, out, dout, dx, weight, bias all F32 or all BF16; mean, rstd, dweight, dbias F32.
// Every sum is F32.
//
// The parameter gradients are column sums over rows. They are deterministic without float
// atomics: rows are cut into fixed chunks (a function of the shape only), each chunk's column
// sums go into a scratch buffer, and a last kernel adds the chunks (one warp per column, its
// lanes striding over the chunks, then a fixed shuffle tree). Where a row has at most 1024
// columns and takes the vector path (GPT-2's 768, in bf16 or f32), one kernel reads dout and x
// once for both dx and the chunks' sums (a block per chunk, the sums in registers); otherwise
// a column-parallel kernel writes the chunks' sums before the row-parallel dx kernel runs.
// Either way dx may alias dout (each dout element is read before, or by the same thread that,
// writes its dx element), as on the CPU.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda {

namespace {

using i64 = std::int64_t;

constexpr int kWarpSize = 32;
constexpr int kThreadsPerBlock = 256;
constexpr int kRowsPerBlock = kThreadsPerBlock / kWarpSize;  // one warp per row
// Parameter gradients: at most this many row chunks, each of at least kMinRowsPerChunk rows.
constexpr i64 kMaxRowChunks = 256;
constexpr i64 kMinRowsPerChunk = 16;

using detail::from_float;
using detail::to_float;

__device__ inline float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  return value;
}

// Warp w of block b normalises row b * kRowsPerBlock + w; its lanes stride over the columns,
// N adjacent ones at a time (N = kVecWidth: 16-byte loads and stores where the row length and
// the pointers allow, element_access.cuh). out may alias x: each element is read by the lane
// that later writes it.
template <int N, class Elem>
__global__ void layer_norm_forward_kernel(Elem* out, float* mean, float* rstd, const Elem* x,
                                          const Elem* weight, const Elem* bias, i64 rows, int cols,
                                          float eps) {
  using detail::load_vec;
  const i64 row = static_cast<i64>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles stay full
  const Elem* xr = x + row * cols;
  float sum = 0.0f;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto xv = load_vec<N>(xr + c);
#pragma unroll
    for (int k = 0; k < N; ++k) sum += to_float(xv.v[k]);
  }
  const float first_mu = warp_sum(sum) / static_cast<float>(cols);
  // As the CPU kernel: the second pass also sums the deviations, which correct the mean's
  // rounding (else it stands as a variance of its own: a constant row would not normalise to 0).
  float deviations = 0.0f, squares = 0.0f;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto xv = load_vec<N>(xr + c);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float deviation = to_float(xv.v[k]) - first_mu;
      deviations += deviation;
      squares += deviation * deviation;
    }
  }
  const float shift = warp_sum(deviations) / static_cast<float>(cols);
  const float mu = first_mu + shift;
  const float variance = fmaxf(warp_sum(squares) / static_cast<float>(cols) - shift * shift, 0.0f);
  const float s = 1.0f / sqrtf(variance + eps);
  Elem* outr = out + row * cols;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto xv = load_vec<N>(xr + c);
    const auto wv = load_vec<N>(weight + c);
    const auto bv = load_vec<N>(bias + c);
    detail::Vec<Elem, N> ov;
#pragma unroll
    for (int k = 0; k < N; ++k)
      ov.v[k] = from_float<Elem>((to_float(xv.v[k]) - mu) * s * to_float(wv.v[k]) +
                                 to_float(bv.v[k]));
    detail::store_vec<N>(outr + c, ov);
  }
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = s;
  }
}

// Thread (column c, chunk k) sums rows [k * rows_per_chunk, ...) of column c in row order into
// partial[k * cols + c]; neighbouring threads read neighbouring columns (coalesced).
template <class Elem>
__global__ void layer_norm_param_partials_kernel(float* dweight_partial, float* dbias_partial,
                                                 const Elem* dout, const Elem* x,
                                                 const float* mean, const float* rstd, i64 rows,
                                                 int cols, i64 rows_per_chunk) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= cols) return;
  const i64 chunk = blockIdx.y;
  const i64 first = chunk * rows_per_chunk;
  const i64 last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  float dw = 0.0f, db = 0.0f;
  for (i64 r = first; r < last; ++r) {
    const float d = to_float(dout[r * cols + c]);
    dw += d * ((to_float(x[r * cols + c]) - mean[r]) * rstd[r]);
    db += d;
  }
  dweight_partial[chunk * cols + c] = dw;
  dbias_partial[chunk * cols + c] = db;
}

// dweight[c] += the chunks' sums of column c: warp w of the grid takes column w, lane l adds
// chunks l, l + 32, ... in order, then the lanes' sums meet in warp_sum's fixed tree.
__global__ void layer_norm_param_sum_kernel(float* dweight, float* dbias,
                                            const float* dweight_partial,
                                            const float* dbias_partial, int n_chunks, int cols) {
  const i64 c = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (c >= cols) return;  // whole warps leave together
  float dw = 0.0f, db = 0.0f;
  for (int k = lane; k < n_chunks; k += kWarpSize) {
    dw += dweight_partial[static_cast<i64>(k) * cols + c];
    db += dbias_partial[static_cast<i64>(k) * cols + c];
  }
  dw = warp_sum(dw);
  db = warp_sum(db);
  if (lane == 0) {
    dweight[c] += dw;
    dbias[c] += db;
  }
}

// Columns [c, c + N) of a row's dx, from the row's statistics and the warp's two means; with a
// residual row, dx is rounded first and the residual added (__fadd_rn: never contracted with
// the product into one fused multiply-add, which would skip the rounding a separate
// accumulate performs).
template <int N, class Elem>
__device__ inline void write_dx(Elem* dxr, const Elem* dr, const Elem* xr, const Elem* weight,
                                const Elem* residual_row, int c, float mu, float s,
                                float mean_dnorm, float mean_dnorm_xhat) {
  using detail::load_vec;
  const auto dv = load_vec<N>(dr + c);
  const auto wv = load_vec<N>(weight + c);
  const auto xv = load_vec<N>(xr + c);
  detail::Vec<Elem, N> out;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const float xhat = (to_float(xv.v[k]) - mu) * s;
    out.v[k] = from_float<Elem>(
        (to_float(dv.v[k]) * to_float(wv.v[k]) - mean_dnorm - xhat * mean_dnorm_xhat) * s);
  }
  if (residual_row != nullptr) {
    const auto rv = load_vec<N>(residual_row + c);
#pragma unroll
    for (int k = 0; k < N; ++k)
      out.v[k] = from_float<Elem>(__fadd_rn(to_float(out.v[k]), to_float(rv.v[k])));
  }
  detail::store_vec<N>(dxr + c, out);
}

// One warp per row, N columns at a time, as the forward. dx may alias dout: the row's sums are
// complete before any lane writes, and each lane writes only the elements it read. residual
// (may be null) is added to dx after dx is rounded, as a separate accumulate would.
template <int N, class Elem>
__global__ void layer_norm_dx_kernel(Elem* dx, const Elem* dout, const Elem* x,
                                     const Elem* weight, const float* mean, const float* rstd,
                                     const Elem* residual, i64 rows, int cols) {
  using detail::load_vec;
  const i64 row = static_cast<i64>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (row >= rows) return;
  const Elem* xr = x + row * cols;
  const Elem* dr = dout + row * cols;
  const float mu = mean[row], s = rstd[row];
  float sum_dnorm = 0.0f, sum_dnorm_xhat = 0.0f;
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    const auto dv = load_vec<N>(dr + c);
    const auto wv = load_vec<N>(weight + c);
    const auto xv = load_vec<N>(xr + c);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float dnorm = to_float(dv.v[k]) * to_float(wv.v[k]);
      sum_dnorm += dnorm;
      sum_dnorm_xhat += dnorm * ((to_float(xv.v[k]) - mu) * s);
    }
  }
  const float mean_dnorm = warp_sum(sum_dnorm) / static_cast<float>(cols);
  const float mean_dnorm_xhat = warp_sum(sum_dnorm_xhat) / static_cast<float>(cols);
  Elem* dxr = dx + row * cols;
  const Elem* residual_row = residual != nullptr ? residual + row * cols : nullptr;
  for (int c = lane * N; c < cols; c += kWarpSize * N)
    write_dx<N>(dxr, dr, xr, weight, residual_row, c, mu, s, mean_dnorm, mean_dnorm_xhat);
}

// The backward in one pass over dout and x, for rows a warp's registers can hold the
// parameter sums of (8 columns a lane, at most kMaxFusedPacks x 256 columns): block k takes
// row chunk k (the partials kernel's chunks), warp w its rows w, w + 8, ...; each lane adds its
// columns' dweight and dbias terms over its rows in registers, then the block's warps add
// theirs into shared memory in warp order and the block writes the chunk's partials, which
// layer_norm_param_sum_kernel finishes. dx is the dx kernel's, residual included; it may alias
// dout (a lane reads a row's elements before it writes them).
constexpr int kMaxFusedPacks = 4;
constexpr int kMaxFusedCols = kMaxFusedPacks * kWarpSize * detail::kVecWidth;  // 1024

// At most 128 registers, so two blocks fit an SM (GPT-2's 3 packs in F32 wanted 138).
template <int kPacks, class Elem>
__global__ void __launch_bounds__(kThreadsPerBlock, 2)
    layer_norm_backward_fused_kernel(Elem* dx, float* dweight_partial, float* dbias_partial,
                                     const Elem* dout, const Elem* x, const Elem* weight,
                                     const float* mean, const float* rstd, const Elem* residual,
                                     i64 rows, int cols, i64 rows_per_chunk) {
  constexpr int N = detail::kVecWidth;
  using detail::load_vec;
  __shared__ float block_dweight[kMaxFusedCols];
  __shared__ float block_dbias[kMaxFusedCols];
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const i64 chunk = blockIdx.x;
  const i64 first = chunk * rows_per_chunk;
  const i64 last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  float dweight_sum[kPacks][N], dbias_sum[kPacks][N];
#pragma unroll
  for (int p = 0; p < kPacks; ++p)
#pragma unroll
    for (int k = 0; k < N; ++k) dweight_sum[p][k] = dbias_sum[p][k] = 0.0f;

  // No early exit anywhere: every thread reaches the barriers below.
  for (i64 row = first + warp; row < last; row += kRowsPerBlock) {
    const Elem* xr = x + row * cols;
    const Elem* dr = dout + row * cols;
    const float mu = mean[row], s = rstd[row];
    float sum_dnorm = 0.0f, sum_dnorm_xhat = 0.0f;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int c = (p * kWarpSize + lane) * N;
      if (c >= cols) continue;
      const auto dv = load_vec<N>(dr + c);
      const auto wv = load_vec<N>(weight + c);
      const auto xv = load_vec<N>(xr + c);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float d = to_float(dv.v[k]);
        const float xhat = (to_float(xv.v[k]) - mu) * s;
        const float dnorm = d * to_float(wv.v[k]);
        sum_dnorm += dnorm;
        sum_dnorm_xhat += dnorm * xhat;
        dweight_sum[p][k] += d * xhat;
        dbias_sum[p][k] += d;
      }
    }
    const float mean_dnorm = warp_sum(sum_dnorm) / static_cast<float>(cols);
    const float mean_dnorm_xhat = warp_sum(sum_dnorm_xhat) / static_cast<float>(cols);
    Elem* dxr = dx + row * cols;
    const Elem* residual_row = residual != nullptr ? residual + row * cols : nullptr;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int c = (p * kWarpSize + lane) * N;
      if (c < cols)
        write_dx<N>(dxr, dr, xr, weight, residual_row, c, mu, s, mean_dnorm, mean_dnorm_xhat);
    }
  }

  // The block's sums: warp 0's, plus warp 1's, ... in warp order (each lane owns its columns).
  // Shared memory holds column (p * 32 + lane) * N + k at slot (p * N + k) * 32 + lane, so a
  // warp's 32 lanes touch 32 consecutive words (no bank conflicts).
  for (int w = 0; w < kRowsPerBlock; ++w) {
    if (warp == w) {
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        if ((p * kWarpSize + lane) * N >= cols) continue;
#pragma unroll
        for (int k = 0; k < N; ++k) {
          const int slot = (p * N + k) * kWarpSize + lane;
          block_dweight[slot] = (w == 0 ? 0.0f : block_dweight[slot]) + dweight_sum[p][k];
          block_dbias[slot] = (w == 0 ? 0.0f : block_dbias[slot]) + dbias_sum[p][k];
        }
      }
    }
    __syncthreads();
  }
  for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) {
    const int p = c / (kWarpSize * N), lane_of_c = (c / N) % kWarpSize, k = c % N;
    const int slot = (p * N + k) * kWarpSize + lane_of_c;
    dweight_partial[chunk * cols + c] = block_dweight[slot];
    dbias_partial[chunk * cols + c] = block_dbias[slot];
  }
}

int checked_cols(const Tensor& x) {
  // The lanes' column index steps by up to 32 x kVecWidth past the last column.
  TN_CHECK(x.size(-1) <= 0x7FFFFFFF - kWarpSize * detail::kVecWidth, "layer_norm (cuda): ",
           x.size(-1), " columns exceed 32-bit indexing");
  return static_cast<int>(x.size(-1));
}

unsigned row_blocks(i64 rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

template <class Elem>
void forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& weight,
             const Tensor& bias, float eps) {
  const int cols = checked_cols(x);
  const i64 rows = x.numel() / cols;
  if (rows == 0) return;
  const int width = detail::vector_width(cols, out.data<Elem>(), x.data<Elem>(),
                                         weight.data<Elem>(), bias.data<Elem>());
  detail::with_vector_width(width, [&](auto n) {
    layer_norm_forward_kernel<decltype(n)::value, Elem>
        <<<row_blocks(rows), kThreadsPerBlock, 0, compute_stream()>>>(
            out.data<Elem>(), mean.data<float>(), rstd.data<float>(), x.data<Elem>(),
            weight.data<Elem>(), bias.data<Elem>(), rows, cols, eps);
    TN_CUDA_CHECK_LAUNCH();
  });
}

template <class Elem>
void backward(Tensor& dx, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& x,
              const Tensor& weight, const Tensor& mean, const Tensor& rstd,
              const Tensor* residual) {
  const int cols = checked_cols(x);
  const i64 rows = x.numel() / cols;
  if (rows == 0) return;  // nothing to add to dweight, dbias; dx is empty
  cudaStream_t stream = compute_stream();

  // Chunks depend only on `rows`, so the summation order (hence every bit) is fixed per shape
  // and path: the one-pass kernel (aligned rows of at most 1024 columns) adds a chunk's rows
  // warp by warp, the two-kernel path row by row.
  i64 n_chunks = (rows + kMinRowsPerChunk - 1) / kMinRowsPerChunk;
  if (n_chunks > kMaxRowChunks) n_chunks = kMaxRowChunks;
  const i64 rows_per_chunk = (rows + n_chunks - 1) / n_chunks;
  n_chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;  // drop chunks left empty
  Tensor partials = Tensor::empty({2, n_chunks, cols}, DType::F32, x.device());
  float* dweight_partial = partials.data<float>();
  float* dbias_partial = dweight_partial + n_chunks * cols;

  const auto column_warp_blocks = static_cast<unsigned>(
      (static_cast<i64>(cols) * kWarpSize + kThreadsPerBlock - 1) / kThreadsPerBlock);
  const auto finish_parameter_gradients = [&] {
    layer_norm_param_sum_kernel<<<column_warp_blocks, kThreadsPerBlock, 0, stream>>>(
        dweight.data<float>(), dbias.data<float>(), dweight_partial, dbias_partial,
        static_cast<int>(n_chunks), cols);
    TN_CUDA_CHECK_LAUNCH();
  };
  const Elem* residual_data = residual != nullptr ? residual->data<Elem>() : nullptr;
  // A null residual counts as aligned: vector access needs only the tensors there are.
  const int width = detail::vector_width(cols, dx.data<Elem>(), dout.data<Elem>(),
                                         x.data<Elem>(), weight.data<Elem>(), residual_data);

  if (width == detail::kVecWidth && cols <= kMaxFusedCols) {
    // One pass: dx and the chunks' partials together, then the finish.
    const int packs = (cols + kWarpSize * detail::kVecWidth - 1) / (kWarpSize * detail::kVecWidth);
    const auto launch = [&](auto packs_constant) {
      layer_norm_backward_fused_kernel<decltype(packs_constant)::value, Elem>
          <<<static_cast<unsigned>(n_chunks), kThreadsPerBlock, 0, stream>>>(
              dx.data<Elem>(), dweight_partial, dbias_partial, dout.data<Elem>(),
              x.data<Elem>(), weight.data<Elem>(), mean.data<float>(), rstd.data<float>(),
              residual_data, rows, cols, rows_per_chunk);
      TN_CUDA_CHECK_LAUNCH();
    };
    switch (packs) {
      case 1: launch(std::integral_constant<int, 1>{}); break;
      case 2: launch(std::integral_constant<int, 2>{}); break;
      case 3: launch(std::integral_constant<int, 3>{}); break;
      default: launch(std::integral_constant<int, kMaxFusedPacks>{}); break;
    }
    finish_parameter_gradients();
    return;
  }

  // Wider or unaligned rows: the partials (column-parallel), then dx (row-parallel; it may
  // overwrite dout, which the partials read first).
  const auto column_blocks =
      static_cast<unsigned>((cols + kThreadsPerBlock - 1) / kThreadsPerBlock);
  const dim3 partial_grid(column_blocks, static_cast<unsigned>(n_chunks));
  layer_norm_param_partials_kernel<Elem><<<partial_grid, kThreadsPerBlock, 0, stream>>>(
      dweight_partial, dbias_partial, dout.data<Elem>(), x.data<Elem>(), mean.data<float>(),
      rstd.data<float>(), rows, cols, rows_per_chunk);
  TN_CUDA_CHECK_LAUNCH();
  finish_parameter_gradients();
  detail::with_vector_width(width, [&](auto n) {
    layer_norm_dx_kernel<decltype(n)::value, Elem>
        <<<row_blocks(rows), kThreadsPerBlock, 0, stream>>>(
            dx.data<Elem>(), dout.data<Elem>(), x.data<Elem>(), weight.data<Elem>(),
            mean.data<float>(), rstd.data<float>(), residual_data, rows, cols);
    TN_CUDA_CHECK_LAUNCH();
  });
  // `partials` goes back to the caching allocator here; only later work on the compute stream
  // can reuse it, and that runs after these kernels.
}

}  // namespace

void layer_norm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, float eps) {
  if (x.dtype() == DType::BF16) {
    forward<BFloat16>(out, mean, rstd, x, weight, bias, eps);
  } else {
    forward<float>(out, mean, rstd, x, weight, bias, eps);
  }
}

void layer_norm_backward(Tensor& dx, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                         const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor* residual) {
  if (x.dtype() == DType::BF16) {
    backward<BFloat16>(dx, dweight, dbias, dout, x, weight, mean, rstd, residual);
  } else {
    backward<float>(dx, dweight, dbias, dout, x, weight, mean, rstd, residual);
  }
}

}  // namespace ternion::cuda
