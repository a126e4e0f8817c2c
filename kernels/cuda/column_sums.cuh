// Deterministic column sums of a row-major [rows, cols] gradient on the GPU, without float
// atomics: what bias_add_backward computes, and gelu_backward's fused bias gradient.
//
// Pass 1 gives each block 32 columns of one chunk of rows, its 8 row lanes each summing every
// 8th row of the chunk in order, then the lanes in lane order, into partials [chunk, cols];
// pass 2 adds each column's chunk partials in chunk order into dsum (F32, accumulating). The
// chunking depends only on rows, so a shape always sums in the same order, and every caller
// (whatever the value it sums) gives the bits bias_add_backward gives on those values.
//
// The value summed at flat index i comes from a `Source` functor, `Elem operator()(i)`, which
// may also write it somewhere (gelu_backward writes dx there): so a gradient can be produced
// and reduced in one pass over memory.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/tensor.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda::detail {

constexpr int kSumColumnsPerBlock = 32;  // one warp across adjacent columns: coalesced rows
constexpr int kSumRowLanes = 8;          // 32 x 8 = 256 threads per block
constexpr long long kSumMinRowsPerChunk = 256;
constexpr long long kSumMaxChunks = 1024;

// partials[chunk * cols + c] = sum of source(r * cols + c) over the chunk's rows. Block (x, y):
// columns [32 x, 32 x + 32), chunk y; thread (tx, ty): column 32 x + tx, rows chunk_begin +
// ty + 8 j. Every in-range index is visited exactly once.
template <class Source>
__global__ void column_sum_partials_kernel(float* __restrict__ partials, Source source,
                                           long long rows, long long cols,
                                           long long rows_per_chunk) {
  __shared__ float lane_sums[kSumRowLanes][kSumColumnsPerBlock];
  const long long c = static_cast<long long>(blockIdx.x) * kSumColumnsPerBlock + threadIdx.x;
  const long long row_begin = static_cast<long long>(blockIdx.y) * rows_per_chunk;
  const long long row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  float sum = 0.0f;
  // __fadd_rn: never contracted with a source's last product into a fused multiply-add, so
  // the sum sees the value the source wrote, as a separate bias_add_backward would.
  if (c < cols)
    for (long long r = row_begin + threadIdx.y; r < row_end; r += kSumRowLanes)
      sum = __fadd_rn(sum, to_float(source(r * cols + c)));
  lane_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int lane = 0; lane < kSumRowLanes; ++lane) total += lane_sums[lane][threadIdx.x];
    partials[static_cast<long long>(blockIdx.y) * cols + c] = total;
  }
}

// Pass 2: dsum[c] += partials[0, c] + partials[1, c] + ... in chunk order (column_sums.cu).
void launch_column_sum_finish(float* dsum, const float* partials, long long chunks,
                              long long cols, cudaStream_t stream);

// dsum [cols] (F32) += column sums of the [rows, cols] values `source` gives, on the compute
// stream. dsum's device holds the scratch.
template <class Source>
void sum_columns(Tensor& dsum, Source source, long long rows, long long cols) {
  if (rows == 0 || cols == 0) return;
  cudaStream_t stream = compute_stream();
  const long long rows_per_chunk =
      std::max(kSumMinRowsPerChunk, (rows + kSumMaxChunks - 1) / kSumMaxChunks);
  const long long chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  Tensor partials = Tensor::empty({chunks, cols}, DType::F32, dsum.device());
  const dim3 grid(static_cast<unsigned>((cols + kSumColumnsPerBlock - 1) / kSumColumnsPerBlock),
                  static_cast<unsigned>(chunks));
  const dim3 block(kSumColumnsPerBlock, kSumRowLanes);
  column_sum_partials_kernel<<<grid, block, 0, stream>>>(partials.data<float>(), source, rows,
                                                         cols, rows_per_chunk);
  TN_CUDA_CHECK_LAUNCH();
  launch_column_sum_finish(dsum.data<float>(), partials.data<float>(), chunks, cols, stream);
  // `partials` returns to the caching allocator; only later compute-stream work reuses it.
}

}  // namespace ternion::cuda::detail
