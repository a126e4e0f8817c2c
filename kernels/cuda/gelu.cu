// GELU on the GPU (contract in kernels/gelu.h): gelu_math.h's gelu_value and gelu_derivative,
// the CPU's functions, in F32 on F32 or BF16 storage (all tensors of a call one dtype).
// out may alias x and dx may alias dout: each element is read before it is written.
// With dbias the backward runs as column_sums.cuh's reduction whose source computes and writes
// each dx element, so the linear layer's bias gradient costs no second read of dx.
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/gelu_math.h"

namespace ternion::cuda {

namespace {

using detail::from_float;
using detail::grid_start;
using detail::grid_stride;
using detail::to_float;

template <class Elem>
__global__ void gelu_forward_kernel(Elem* out, const Elem* x, long long n) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    out[i] = from_float<Elem>(gelu_value(to_float(x[i])));
}

template <class Elem>
__global__ void gelu_backward_kernel(Elem* dx, const Elem* x, const Elem* dout, long long n) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    dx[i] = from_float<Elem>(gelu_derivative(to_float(x[i])) * to_float(dout[i]));
}

// dx[i] = gelu'(x[i]) * dout[i], written, and returned for column_sums.cuh to add. dx may
// alias dout: each index is read, then written, by one thread.
template <class Elem>
struct GeluGradient {
  Elem* dx;
  const Elem* x;
  const Elem* dout;
  __device__ Elem operator()(long long i) const {
    const Elem value = from_float<Elem>(gelu_derivative(to_float(x[i])) * to_float(dout[i]));
    dx[i] = value;
    return value;
  }
};

}  // namespace

void gelu_forward(Tensor& out, const Tensor& x) {
  cudaStream_t stream = compute_stream();
  const long long n = x.numel();
  if (n == 0) return;
  detail::dispatch_float_dtype(x.dtype(), "gelu_forward", [&](auto elem) {
    using Elem = decltype(elem);
    gelu_forward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        out.data<Elem>(), x.data<Elem>(), n);
    TN_CUDA_CHECK_LAUNCH();
  });
}

void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dout, Tensor* dbias) {
  cudaStream_t stream = compute_stream();
  const long long n = x.numel();
  if (n == 0) return;
  detail::dispatch_float_dtype(x.dtype(), "gelu_backward", [&](auto elem) {
    using Elem = decltype(elem);
    if (dbias != nullptr) {
      const long long cols = dbias->numel();
      detail::sum_columns(*dbias, GeluGradient<Elem>{dx.data<Elem>(), x.data<Elem>(),
                                                     dout.data<Elem>()},
                          n / cols, cols);
      return;
    }
    gelu_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        dx.data<Elem>(), x.data<Elem>(), dout.data<Elem>(), n);
    TN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ternion::cuda
