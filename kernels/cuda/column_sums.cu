// The finishing pass of column_sums.cuh, which every column sum shares.
#include "kernels/cuda/column_sums.cuh"

namespace ternion::cuda::detail {

namespace {

__global__ void column_sum_finish_kernel(float* __restrict__ dsum,
                                         const float* __restrict__ partials, long long chunks,
                                         long long cols) {
  for (long long c = grid_start(); c < cols; c += grid_stride()) {
    float sum = 0.0f;
    for (long long chunk = 0; chunk < chunks; ++chunk) sum += partials[chunk * cols + c];
    dsum[c] += sum;
  }
}

}  // namespace

void launch_column_sum_finish(float* dsum, const float* partials, long long chunks,
                              long long cols, cudaStream_t stream) {
  column_sum_finish_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(dsum, partials, chunks,
                                                                      cols);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace ternion::cuda::detail
