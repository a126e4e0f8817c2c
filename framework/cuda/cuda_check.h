// Check macros for the CUDA runtime and its libraries, from one generator like TN_CHECK.
//
//   TN_CUDA_CHECK(cudaMemcpyAsync(...));   // cudaError_t
//   TN_CUBLAS_CHECK(cublasLtMatmul(...));  // cublasStatus_t
//   TN_CUDNN_CHECK(cudnnBackendExecute(...));
//   TN_CUDA_CHECK_LAUNCH();                // after every kernel launch: cudaGetLastError()
//
// Each throws CudaError with file:line, the failed statement, the library's error string and
// the device. NCCL's macro lives with the NCCL communicator (parallel/comm/nccl_check.h).
// Only CUDA builds include this header.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "framework/error.h"

namespace ternion::cuda::detail {
inline int current_device_or_minus_one() noexcept {
  int device = -1;
  return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}
}  // namespace ternion::cuda::detail

#define TN_CUDA_LIBRARY_CHECK(call, ok, describe)                                            \
  do {                                                                                       \
    const auto tn_status = (call);                                                           \
    if (tn_status != (ok))                                                                   \
      TN_THROW(CudaError, __FILE__, ":", __LINE__, ": ", #call, " failed: ", describe,       \
               " (cuda:", ::ternion::cuda::detail::current_device_or_minus_one(), ")");      \
  } while (0)

#define TN_CUDA_CHECK(call) TN_CUDA_LIBRARY_CHECK(call, cudaSuccess, cudaGetErrorString(tn_status))
#define TN_CUBLAS_CHECK(call) \
  TN_CUDA_LIBRARY_CHECK(call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString(tn_status))
// cuDNN callers include <cudnn.h> themselves (only kernels/ links cuDNN).
#define TN_CUDNN_CHECK(call) \
  TN_CUDA_LIBRARY_CHECK(call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString(tn_status))
#define TN_CUDA_CHECK_LAUNCH() TN_CUDA_CHECK(cudaGetLastError())
