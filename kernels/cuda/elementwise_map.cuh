// Elementwise maps on the GPU: out[i] = op(a[i]) or op(a[i], b[i]) over n flat elements, the
// op taking and returning F32 and its result rounded once to out's dtype, as every elementwise
// kernel rounds. Where n and the pointers allow (element_access.cuh's vector_width) each thread
// handles kVecWidth elements with vector loads and stores, else one. out may alias an input:
// each thread reads its elements before it writes them.
#pragma once

#include <cuda_runtime_api.h>

#include "framework/cuda/cuda_check.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda::detail {

template <int N, class Out, class A, class Op>
__global__ void map1_kernel(Out* out, const A* a, long long n, Op op) {
  for (long long i = grid_start() * N; i < n; i += grid_stride() * N) {
    const Vec<A, N> va = load_vec<N>(a + i);
    Vec<Out, N> result;
#pragma unroll
    for (int k = 0; k < N; ++k) result.v[k] = from_float<Out>(op(to_float(va.v[k])));
    store_vec<N>(out + i, result);
  }
}

template <int N, class Out, class A, class B, class Op>
__global__ void map2_kernel(Out* out, const A* a, const B* b, long long n, Op op) {
  for (long long i = grid_start() * N; i < n; i += grid_stride() * N) {
    const Vec<A, N> va = load_vec<N>(a + i);
    const Vec<B, N> vb = load_vec<N>(b + i);
    Vec<Out, N> result;
#pragma unroll
    for (int k = 0; k < N; ++k)
      result.v[k] = from_float<Out>(op(to_float(va.v[k]), to_float(vb.v[k])));
    store_vec<N>(out + i, result);
  }
}

template <class Out, class A, class Op>
void map1(Out* out, const A* a, long long n, Op op, cudaStream_t stream) {
  if (n == 0) return;
  with_vector_width(vector_width(n, out, a), [&](auto width) {
    constexpr int kWidth = decltype(width)::value;
    map1_kernel<kWidth><<<blocks_for(n / kWidth), kThreads, 0, stream>>>(out, a, n, op);
    TN_CUDA_CHECK_LAUNCH();
  });
}

template <class Out, class A, class B, class Op>
void map2(Out* out, const A* a, const B* b, long long n, Op op, cudaStream_t stream) {
  if (n == 0) return;
  with_vector_width(vector_width(n, out, a, b), [&](auto width) {
    constexpr int kWidth = decltype(width)::value;
    map2_kernel<kWidth><<<blocks_for(n / kWidth), kThreads, 0, stream>>>(out, a, b, n, op);
    TN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ternion::cuda::detail
