// SwiGLU on the GPU (contract in kernels/swiglu.h): swiglu_math.h's swiglu_value and
// swiglu_gradient, the CPU's functions, in F32 on F32 or BF16 storage (all tensors of a call
// one dtype). Feature i of the flattened output pairs with gate_up[2i] (gate) and
// gate_up[2i + 1] (up), so the op is elementwise over features whatever the row length: a
// grid-stride loop, each thread taking N adjacent features (N = kVecWidth where the feature
// count and the pointers allow, element_access.cuh's vector_width; then its 2N gate_up values
// are two aligned 16-byte-multiple vectors). dgate_up may alias gate_up: each thread reads its
// pairs before it writes them.
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/swiglu_math.h"

namespace ternion::cuda {

namespace {

using detail::from_float;
using detail::load_vec;
using detail::to_float;
using detail::Vec;

// Element m of the 2N values lo ++ hi: feature k's gate is m = 2k, its up 2k + 1.
template <int N, class Elem>
__device__ inline float pair_element(const Vec<Elem, N>& lo, const Vec<Elem, N>& hi, int m) {
  return to_float(m < N ? lo.v[m] : hi.v[m - N]);
}

template <int N, class Elem>
__global__ void __launch_bounds__(detail::kThreads)
    swiglu_forward_kernel(Elem* out, const Elem* gate_up, long long n) {
  for (long long i = detail::grid_start() * N; i < n; i += detail::grid_stride() * N) {
    const auto lo = load_vec<N>(gate_up + 2 * i);
    const auto hi = load_vec<N>(gate_up + 2 * i + N);
    Vec<Elem, N> result;
#pragma unroll
    for (int k = 0; k < N; ++k)
      result.v[k] = from_float<Elem>(
          swiglu_value(pair_element(lo, hi, 2 * k), pair_element(lo, hi, 2 * k + 1)));
    detail::store_vec<N>(out + i, result);
  }
}

template <int N, class Elem>
__global__ void __launch_bounds__(detail::kThreads)
    swiglu_backward_kernel(Elem* dgate_up, const Elem* dout, const Elem* gate_up, long long n) {
  for (long long i = detail::grid_start() * N; i < n; i += detail::grid_stride() * N) {
    const auto lo = load_vec<N>(gate_up + 2 * i);
    const auto hi = load_vec<N>(gate_up + 2 * i + N);
    const auto dv = load_vec<N>(dout + i);
    Vec<Elem, 2 * N> grads;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float dgate, dup;
      swiglu_gradient(pair_element(lo, hi, 2 * k), pair_element(lo, hi, 2 * k + 1),
                      to_float(dv.v[k]), dgate, dup);
      grads.v[2 * k] = from_float<Elem>(dgate);
      grads.v[2 * k + 1] = from_float<Elem>(dup);
    }
    Vec<Elem, N> grads_lo, grads_hi;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      grads_lo.v[k] = grads.v[k];
      grads_hi.v[k] = grads.v[N + k];
    }
    detail::store_vec<N>(dgate_up + 2 * i, grads_lo);
    detail::store_vec<N>(dgate_up + 2 * i + N, grads_hi);
  }
}

}  // namespace

void swiglu_forward(Tensor& out, const Tensor& gate_up) {
  const long long n = out.numel();
  if (n == 0) return;
  detail::dispatch_float_dtype(gate_up.dtype(), "swiglu_forward", [&](auto elem) {
    using Elem = decltype(elem);
    const int width = detail::vector_width(n, out.data<Elem>(), gate_up.data<Elem>());
    detail::with_vector_width(width, [&](auto w) {
      constexpr int kWidth = decltype(w)::value;
      swiglu_forward_kernel<kWidth><<<detail::blocks_for(n / kWidth), detail::kThreads, 0,
                                      compute_stream()>>>(out.data<Elem>(),
                                                          gate_up.data<Elem>(), n);
      TN_CUDA_CHECK_LAUNCH();
    });
  });
}

void swiglu_backward(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up) {
  const long long n = dout.numel();
  if (n == 0) return;
  detail::dispatch_float_dtype(gate_up.dtype(), "swiglu_backward", [&](auto elem) {
    using Elem = decltype(elem);
    const int width = detail::vector_width(n, dgate_up.data<Elem>(), dout.data<Elem>(),
                                           gate_up.data<Elem>());
    detail::with_vector_width(width, [&](auto w) {
      constexpr int kWidth = decltype(w)::value;
      swiglu_backward_kernel<kWidth><<<detail::blocks_for(n / kWidth), detail::kThreads, 0,
                                       compute_stream()>>>(
          dgate_up.data<Elem>(), dout.data<Elem>(), gate_up.data<Elem>(), n);
      TN_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace ternion::cuda
