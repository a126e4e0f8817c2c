// The finishing pass of column_sums.cuh, which every column sum shares: a warp per column, so
// a few thousand columns of a few hundred chunks each spread over the SMs.
#include "kernels/cuda/column_sums.cuh"

namespace ternion::cuda::detail {

namespace {

constexpr int kWarpSize = 32;

__global__ void column_sum_finish_kernel(float* __restrict__ dsum,
                                         const float* __restrict__ partials, long long chunks,
                                         long long cols) {
  const long long c = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (c >= cols) return;  // whole warps leave together
  float sum = 0.0f;
  for (long long chunk = lane; chunk < chunks; chunk += kWarpSize)
    sum += partials[chunk * cols + c];
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
  if (lane == 0) dsum[c] += sum;
}

}  // namespace

void launch_column_sum_finish(float* dsum, const float* partials, long long chunks,
                              long long cols, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((cols * kWarpSize + kThreads - 1) / kThreads);
  column_sum_finish_kernel<<<blocks, kThreads, 0, stream>>>(dsum, partials, chunks, cols);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace ternion::cuda::detail
