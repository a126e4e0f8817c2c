// Bias add on the GPU (contract in kernels/bias_add.h).
//   forward   out [rows, cols] += bias [cols]     out and bias one dtype, F32 or BF16
//   backward  dbias [cols] (F32) += column sums of dout [rows, cols] (F32 or BF16)
//
// The backward is column_sums.cuh's deterministic two-pass reduction of dout.
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda {

namespace {

using detail::from_float;
using detail::grid_start;
using detail::grid_stride;
using detail::to_float;

template <class Elem>
__global__ void bias_add_forward_kernel(Elem* __restrict__ out, const Elem* __restrict__ bias,
                                        long long n, long long cols) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    out[i] = from_float<Elem>(to_float(out[i]) + to_float(bias[i % cols]));
}

// The dout elements summed at flat indices [i, i + N) (column_sums.cuh's Source).
template <class Elem>
struct ReadGradient {
  const Elem* dout;
  template <int N>
  __device__ detail::Vec<Elem, N> load(long long i) const {
    return detail::load_vec<N>(dout + i);
  }
};

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
  const long long cols = dbias.numel();
  const long long rows = cols == 0 ? 0 : dout.numel() / cols;
  detail::dispatch_float_dtype(dout.dtype(), "bias_add_backward", [&](auto elem) {
    using Elem = decltype(elem);
    detail::sum_columns(dbias, ReadGradient<Elem>{dout.data<Elem>()}, rows, cols,
                        detail::vector_width(cols, dout.data<Elem>()));
  });
}

}  // namespace ternion::cuda
