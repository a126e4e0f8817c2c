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
#include "kernels/cuda/elementwise_map.cuh"
#include "kernels/gelu_math.h"

namespace ternion::cuda {

namespace {

using detail::from_float;
using detail::to_float;

struct GeluOp {
  __device__ float operator()(float x) const { return gelu_value(x); }
};

struct GeluGradientOp {  // (x, dout) -> gelu'(x) * dout
  __device__ float operator()(float x, float dout) const { return gelu_derivative(x) * dout; }
};

// dx[j] = gelu'(x[j]) * dout[j] for j in [i, i + N), written, and returned for column_sums.cuh
// to add. dx may alias dout: each index is read, then written, by one thread.
template <class Elem>
struct GeluGradient {
  Elem* dx;
  const Elem* x;
  const Elem* dout;
  template <int N>
  __device__ detail::Vec<Elem, N> load(long long i) const {
    const auto xv = detail::load_vec<N>(x + i);
    const auto dv = detail::load_vec<N>(dout + i);
    detail::Vec<Elem, N> out;
#pragma unroll
    for (int k = 0; k < N; ++k)
      out.v[k] = from_float<Elem>(GeluGradientOp{}(to_float(xv.v[k]), to_float(dv.v[k])));
    detail::store_vec<N>(dx + i, out);
    return out;
  }
};

}  // namespace

void gelu_forward(Tensor& out, const Tensor& x) {
  detail::dispatch_float_dtype(x.dtype(), "gelu_forward", [&](auto elem) {
    using Elem = decltype(elem);
    detail::map1(out.data<Elem>(), x.data<Elem>(), x.numel(), GeluOp{}, compute_stream());
  });
}

void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dout, Tensor* dbias) {
  const long long n = x.numel();
  if (n == 0) return;
  detail::dispatch_float_dtype(x.dtype(), "gelu_backward", [&](auto elem) {
    using Elem = decltype(elem);
    if (dbias != nullptr) {
      const long long cols = dbias->numel();
      const int width =
          detail::vector_width(cols, dx.data<Elem>(), x.data<Elem>(), dout.data<Elem>());
      detail::sum_columns(
          *dbias, GeluGradient<Elem>{dx.data<Elem>(), x.data<Elem>(), dout.data<Elem>()},
          n / cols, cols, width);
      return;
    }
    detail::map2(dx.data<Elem>(), x.data<Elem>(), dout.data<Elem>(), n, GeluGradientOp{},
                 compute_stream());
  });
}

}  // namespace ternion::cuda
