// Deterministic column sums of a row-major [rows, cols] gradient on the GPU, without float
// atomics: what bias_add_backward computes, and gelu_backward's fused bias gradient.
//
// Pass 1 gives each block 32 x N columns of one chunk of rows (N adjacent columns per thread,
// N = kVecWidth for 16-byte access where the row length and pointers allow, else 1), its 8 row
// lanes each summing every 8th row of the chunk in order, then the lanes in lane order, into
// partials [chunk, cols]; pass 2 adds each column's chunk partials in a fixed order into dsum
// (F32, accumulating). Each column is summed in the same order whatever N is, and the chunking
// depends only on rows, so a shape always gives the same bits, and every caller (whatever the
// value it sums) gives the bits bias_add_backward gives on those values.
//
// The values summed come from a `Source` functor: `source.template load<N>(i)` returns the N
// values at flat indices [i, i + N) as a Vec, and may also write them somewhere (gelu_backward
// writes dx there): so a gradient can be produced and reduced in one pass over memory.
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
// 64-row chunks: at a micro-batch of 16k rows, 256 chunks, so even 768 columns (3 blocks
// across at 8 columns a thread) make 768 blocks, enough to fill every SM.
constexpr long long kSumMinRowsPerChunk = 64;
constexpr long long kSumMaxChunks = 1024;

// partials[chunk * cols + c] = sum of source(r * cols + c) over the chunk's rows. Block (x, y):
// columns [32 N x, 32 N (x + 1)), chunk y; thread (tx, ty): columns 32 N x + N tx + [0, N),
// rows chunk_begin + ty + 8 j. Every in-range index is visited exactly once (with N > 1, cols
// is a multiple of N).
template <int N, class Source>
__global__ void column_sum_partials_kernel(float* __restrict__ partials, Source source,
                                           long long rows, long long cols,
                                           long long rows_per_chunk) {
  __shared__ float lane_sums[kSumRowLanes][kSumColumnsPerBlock * N];
  const long long c0 =
      (static_cast<long long>(blockIdx.x) * kSumColumnsPerBlock + threadIdx.x) * N;
  const long long row_begin = static_cast<long long>(blockIdx.y) * rows_per_chunk;
  const long long row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  float sum[N];
#pragma unroll
  for (int k = 0; k < N; ++k) sum[k] = 0.0f;
  // __fadd_rn: never contracted with a source's last product into a fused multiply-add, so
  // the sum sees the value the source wrote, as a separate bias_add_backward would.
  if (c0 < cols) {
    for (long long r = row_begin + threadIdx.y; r < row_end; r += kSumRowLanes) {
      const auto values = source.template load<N>(r * cols + c0);
#pragma unroll
      for (int k = 0; k < N; ++k) sum[k] = __fadd_rn(sum[k], to_float(values.v[k]));
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k) lane_sums[threadIdx.y][threadIdx.x * N + k] = sum[k];
  __syncthreads();
  // The block's 32 N columns, each the sum of its 8 lanes in lane order, spread over all 256
  // threads (adjacent threads, adjacent columns: no bank conflicts, coalesced writes).
  const long long block_c0 = static_cast<long long>(blockIdx.x) * kSumColumnsPerBlock * N;
  for (int j = threadIdx.y * kSumColumnsPerBlock + threadIdx.x; j < kSumColumnsPerBlock * N;
       j += kSumColumnsPerBlock * kSumRowLanes) {
    if (block_c0 + j >= cols) break;
    float total = 0.0f;
    for (int lane = 0; lane < kSumRowLanes; ++lane) total += lane_sums[lane][j];
    partials[static_cast<long long>(blockIdx.y) * cols + block_c0 + j] = total;
  }
}

// Pass 2: dsum[c] += the chunks' partials of column c: one warp per column, lane l adding
// chunks l, l + 32, ... in order, then the lanes in a fixed shuffle tree (column_sums.cu).
void launch_column_sum_finish(float* dsum, const float* partials, long long chunks,
                              long long cols, cudaStream_t stream);

// dsum [cols] (F32) += column sums of the [rows, cols] values `source` gives, on the compute
// stream, `width` (kVecWidth or 1: vector_width over cols and the source's pointers) columns
// per thread. dsum's device holds the scratch.
template <class Source>
void sum_columns(Tensor& dsum, Source source, long long rows, long long cols, int width) {
  if (rows == 0 || cols == 0) return;
  cudaStream_t stream = compute_stream();
  const long long rows_per_chunk =
      std::max(kSumMinRowsPerChunk, (rows + kSumMaxChunks - 1) / kSumMaxChunks);
  const long long chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  Tensor partials = Tensor::empty({chunks, cols}, DType::F32, dsum.device());
  with_vector_width(width, [&](auto n) {
    constexpr int kWidth = decltype(n)::value;
    const long long block_columns = kSumColumnsPerBlock * kWidth;
    const dim3 grid(static_cast<unsigned>((cols + block_columns - 1) / block_columns),
                    static_cast<unsigned>(chunks));
    const dim3 block(kSumColumnsPerBlock, kSumRowLanes);
    column_sum_partials_kernel<kWidth><<<grid, block, 0, stream>>>(
        partials.data<float>(), source, rows, cols, rows_per_chunk);
    TN_CUDA_CHECK_LAUNCH();
  });
  launch_column_sum_finish(dsum.data<float>(), partials.data<float>(), chunks, cols, stream);
  // `partials` returns to the caching allocator; only later compute-stream work reuses it.
}

}  // namespace ternion::cuda::detail
