// F32 <-> BF16 on the GPU (contract in kernels/convert.h): bfloat16.h's round-to-nearest-even,
// the function the CPU uses, so both devices give the same bits. Equal dtypes copy.
#include <cuda_runtime_api.h>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda {

namespace {

template <class To, class From>
__global__ void convert_kernel(To* __restrict__ out, const From* __restrict__ in, long long n) {
  for (long long i = detail::grid_start(); i < n; i += detail::grid_stride())
    out[i] = detail::from_float<To>(detail::to_float(in[i]));
}

}  // namespace

void convert(Tensor& out, const Tensor& in) {
  cudaStream_t stream = compute_stream();
  TN_CHECK(out.shape() == in.shape() && out.is_contiguous() && in.is_contiguous(),
           "convert (cuda): ", in.str(), " into ", out.str());
  const long long n = out.numel();
  if (n == 0) return;
  if (out.dtype() == in.dtype()) {
    TN_CUDA_CHECK(cudaMemcpyAsync(out.raw_data(), in.raw_data(), out.nbytes(),
                                  cudaMemcpyDeviceToDevice, stream));
  } else if (out.dtype() == DType::BF16 && in.dtype() == DType::F32) {
    convert_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        out.data<BFloat16>(), in.data<float>(), n);
    TN_CUDA_CHECK_LAUNCH();
  } else if (out.dtype() == DType::F32 && in.dtype() == DType::BF16) {
    convert_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        out.data<float>(), in.data<BFloat16>(), n);
    TN_CUDA_CHECK_LAUNCH();
  } else {
    TN_THROW(InternalError, "convert (cuda): no conversion from ", in.str(), " to ", out.str());
  }
}

}  // namespace ternion::cuda
