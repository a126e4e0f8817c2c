// Elementwise helpers on the GPU (contract in kernels/elementwise.h): F32 math on F32 or BF16
// storage, one dtype per call except accumulate's F32 out += BF16 x.
//
// add, accumulate and scale are one F32 operation and one rounding per element, as on the CPU
// (which stages BF16 through F32), so both devices give the same bits. sum_of_squares is a
// deterministic reduction: a grid fixed by n, each thread summing its grid-stride elements in
// double in index order, a fixed tree within each block, and the block sums added on the host
// in block order, so the same tensor always gives the same double (which differs from the
// CPU's chunked order only in the last bits).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda {

namespace {

using detail::from_float;
using detail::grid_start;
using detail::grid_stride;
using detail::kThreads;
using detail::to_float;

constexpr long long kMaxReductionBlocks = 1024;

// out may alias a or b: element i is read before it is written.
template <class Elem>
__global__ void add_kernel(Elem* out, const Elem* a, const Elem* b, long long n) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    out[i] = from_float<Elem>(to_float(a[i]) + to_float(b[i]));
}

template <class Out, class In>
__global__ void accumulate_kernel(Out* out, const In* x, long long n) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    out[i] = from_float<Out>(to_float(out[i]) + to_float(x[i]));
}

template <class Elem>
__global__ void scale_kernel(Elem* x, float factor, long long n) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    x[i] = from_float<Elem>(to_float(x[i]) * factor);
}

// partials[block] = sum of x^2 over this block's grid-stride elements (blockDim == kThreads).
template <class Elem>
__global__ void sum_of_squares_kernel(double* __restrict__ partials, const Elem* __restrict__ x,
                                      long long n) {
  __shared__ double thread_sums[kThreads];
  double sum = 0;
  for (long long i = grid_start(); i < n; i += grid_stride()) {
    const double value = to_float(x[i]);
    sum += value * value;
  }
  thread_sums[threadIdx.x] = sum;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width)
      thread_sums[threadIdx.x] += thread_sums[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = thread_sums[0];
}

// Sets *any_non_finite to 1 if some element is NaN or +-Inf (every writer writes the same 1).
template <class Elem>
__global__ void find_non_finite_kernel(int* any_non_finite, const Elem* __restrict__ x,
                                       long long n) {
  for (long long i = grid_start(); i < n; i += grid_stride()) {
    const float value = to_float(x[i]);
    const std::uint32_t bits = __float_as_uint(value);
    if ((bits & 0x7F800000u) == 0x7F800000u) *any_non_finite = 1;  // exponent all ones
  }
}

}  // namespace

void add(Tensor& out, const Tensor& a, const Tensor& b) {
  cudaStream_t stream = compute_stream();
  const long long n = out.numel();
  if (n == 0) return;
  detail::dispatch_float_dtype(out.dtype(), "add", [&](auto elem) {
    using Elem = decltype(elem);
    add_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(
        out.data<Elem>(), a.data<Elem>(), b.data<Elem>(), n);
    TN_CUDA_CHECK_LAUNCH();
  });
}

void accumulate(Tensor& out, const Tensor& x) {
  cudaStream_t stream = compute_stream();
  const long long n = out.numel();
  if (n == 0) return;
  if (out.dtype() == DType::F32 && x.dtype() == DType::BF16) {
    accumulate_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(
        out.data<float>(), x.data<BFloat16>(), n);
    TN_CUDA_CHECK_LAUNCH();
    return;
  }
  detail::dispatch_float_dtype(out.dtype(), "accumulate", [&](auto elem) {
    using Elem = decltype(elem);
    accumulate_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(
        out.data<Elem>(), x.data<Elem>(), n);
    TN_CUDA_CHECK_LAUNCH();
  });
}

void scale(Tensor& x, float factor) {
  cudaStream_t stream = compute_stream();
  const long long n = x.numel();
  if (n == 0) return;
  detail::dispatch_float_dtype(x.dtype(), "scale", [&](auto elem) {
    using Elem = decltype(elem);
    scale_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x.data<Elem>(), factor, n);
    TN_CUDA_CHECK_LAUNCH();
  });
}

double sum_of_squares(const Tensor& x) {
  cudaStream_t stream = compute_stream();
  const long long n = x.numel();
  if (n == 0) return 0.0;
  const long long blocks = std::min((n + kThreads - 1) / kThreads, kMaxReductionBlocks);
  // One double per block, in an F32 tensor of twice the length (the allocator's blocks are
  // cudaMalloc's, 256-byte aligned).
  Tensor scratch = Tensor::empty({2 * blocks}, DType::F32, x.device());
  auto* partials = reinterpret_cast<double*>(scratch.data<float>());
  TN_CHECK(reinterpret_cast<std::uintptr_t>(partials) % alignof(double) == 0,
           "sum_of_squares (cuda): scratch is not aligned for double");
  detail::dispatch_float_dtype(x.dtype(), "sum_of_squares", [&](auto elem) {
    using Elem = decltype(elem);
    sum_of_squares_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        partials, x.data<Elem>(), n);
    TN_CUDA_CHECK_LAUNCH();
  });
  std::vector<double> host_partials(static_cast<std::size_t>(blocks));
  TN_CUDA_CHECK(cudaMemcpyAsync(host_partials.data(), partials,
                                host_partials.size() * sizeof(double), cudaMemcpyDeviceToHost,
                                stream));
  TN_CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0;
  for (double partial : host_partials) total += partial;  // block order: deterministic
  return total;
}

bool all_finite(const Tensor& x) {
  cudaStream_t stream = compute_stream();
  const long long n = x.numel();
  if (n == 0) return true;
  Tensor flag = Tensor::empty({1}, DType::I32, x.device());
  int* any_non_finite = flag.data<std::int32_t>();
  TN_CUDA_CHECK(cudaMemsetAsync(any_non_finite, 0, sizeof(int), stream));
  detail::dispatch_float_dtype(x.dtype(), "all_finite", [&](auto elem) {
    using Elem = decltype(elem);
    find_non_finite_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(any_non_finite,
                                                                           x.data<Elem>(), n);
    TN_CUDA_CHECK_LAUNCH();
  });
  int host_flag = 0;
  TN_CUDA_CHECK(
      cudaMemcpyAsync(&host_flag, any_non_finite, sizeof(int), cudaMemcpyDeviceToHost, stream));
  TN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host_flag == 0;
}

}  // namespace ternion::cuda
