// Bias add on the GPU (contract in kernels/bias_add.h).
//   forward   out [rows, cols] += bias [cols]     out and bias one dtype, F32 or BF16
//   backward  dbias [cols] (F32) += column sums of dout [rows, cols] (F32 or BF16)
//
// The backward is deterministic without float atomics: pass 1 gives each block 32 columns of
// one chunk of rows, its 8 row lanes each summing every 8th row of the chunk in order, then the
// lanes in lane order, into partials [chunk, cols]; pass 2 adds each column's chunk partials in
// chunk order into dbias. The chunking depends only on rows, so a shape always sums in the
// same order.
#include <algorithm>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda {

namespace {

using detail::from_float;
using detail::grid_start;
using detail::grid_stride;
using detail::to_float;

constexpr int kColumnsPerBlock = 32;  // one warp across adjacent columns: coalesced rows
constexpr int kRowLanes = 8;          // 32 x 8 = 256 threads per block
constexpr long long kMinRowsPerChunk = 256;
constexpr long long kMaxChunks = 1024;

template <class Elem>
__global__ void bias_add_forward_kernel(Elem* __restrict__ out, const Elem* __restrict__ bias,
                                        long long n, long long cols) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    out[i] = from_float<Elem>(to_float(out[i]) + to_float(bias[i % cols]));
}

// partials[chunk * cols + c] = sum of dout[r, c] over the chunk's rows. Block (x, y): columns
// [32 x, 32 x + 32), chunk y; thread (tx, ty): column 32 x + tx, rows chunk_begin + ty + 8 j.
template <class Elem>
__global__ void bias_backward_partials_kernel(float* __restrict__ partials,
                                              const Elem* __restrict__ dout, long long rows,
                                              long long cols, long long rows_per_chunk) {
  __shared__ float lane_sums[kRowLanes][kColumnsPerBlock];
  const long long c = static_cast<long long>(blockIdx.x) * kColumnsPerBlock + threadIdx.x;
  const long long row_begin = static_cast<long long>(blockIdx.y) * rows_per_chunk;
  const long long row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  float sum = 0.0f;
  if (c < cols)
    for (long long r = row_begin + threadIdx.y; r < row_end; r += kRowLanes)
      sum += to_float(dout[r * cols + c]);
  lane_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int lane = 0; lane < kRowLanes; ++lane) total += lane_sums[lane][threadIdx.x];
    partials[static_cast<long long>(blockIdx.y) * cols + c] = total;
  }
}

__global__ void bias_backward_finish_kernel(float* __restrict__ dbias,
                                            const float* __restrict__ partials, long long chunks,
                                            long long cols) {
  for (long long c = grid_start(); c < cols; c += grid_stride()) {
    float sum = 0.0f;
    for (long long chunk = 0; chunk < chunks; ++chunk) sum += partials[chunk * cols + c];
    dbias[c] += sum;
  }
}

}  // namespace

void bias_add_forward(Tensor& out, const Tensor& bias) {
  cudaStream_t stream = compute_stream();
  const long long cols = bias.numel(), n = out.numel();
  if (cols == 0 || n == 0) return;
  detail::dispatch_float_dtype(out.dtype(), "bias_add_forward", [&](auto elem) {
    using Elem = decltype(elem);
    bias_add_forward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        out.data<Elem>(), bias.data<Elem>(), n, cols);
    TN_CUDA_CHECK_LAUNCH();
  });
}

void bias_add_backward(Tensor& dbias, const Tensor& dout) {
  cudaStream_t stream = compute_stream();
  const long long cols = dbias.numel();
  const long long rows = cols == 0 ? 0 : dout.numel() / cols;
  if (rows == 0) return;
  const long long rows_per_chunk =
      std::max(kMinRowsPerChunk, (rows + kMaxChunks - 1) / kMaxChunks);
  const long long chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  Tensor partials = Tensor::empty({chunks, cols}, DType::F32, dout.device());
  const dim3 grid(static_cast<unsigned>((cols + kColumnsPerBlock - 1) / kColumnsPerBlock),
                  static_cast<unsigned>(chunks));
  const dim3 block(kColumnsPerBlock, kRowLanes);
  detail::dispatch_float_dtype(dout.dtype(), "bias_add_backward", [&](auto elem) {
    using Elem = decltype(elem);
    bias_backward_partials_kernel<<<grid, block, 0, stream>>>(
        partials.data<float>(), dout.data<Elem>(), rows, cols, rows_per_chunk);
    TN_CUDA_CHECK_LAUNCH();
  });
  bias_backward_finish_kernel<<<detail::blocks_for(cols), detail::kThreads, 0, stream>>>(
      dbias.data<float>(), partials.data<float>(), chunks, cols);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace ternion::cuda
