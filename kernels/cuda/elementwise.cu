// Elementwise helpers on the GPU (contract in kernels/elementwise.h): F32 math on F32 or BF16
// storage, one dtype per call except accumulate's F32 out += BF16 x.
//
// add, accumulate and scale are one F32 operation and one rounding per element, as on the CPU
// (which stages BF16 through F32), so both devices give the same bits. sums_of_squares is a
// deterministic multi-tensor reduction (multi_tensor.cuh): one launch for every tensor, one
// block per chunk of kReductionChunk elements (the CPU's chunk), each block summing its chunk
// in double along a fixed tree, and each tensor's chunk sums added on the host in chunk
// order, so the same tensors always give the same doubles (which differ from the CPU's only in
// the order within a chunk). The host waits once for all of them: a gradient norm over a
// model's ~150 tensors costs one synchronisation, not one each.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/elementwise_map.cuh"
#include "kernels/cuda/multi_tensor.cuh"

namespace ternion::cuda {

namespace {

using detail::grid_start;
using detail::grid_stride;
using detail::kThreads;
using detail::to_float;

constexpr long long kReductionChunk = 1 << 14;  // elements per block of sums_of_squares

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

struct ScaleOp {
  float factor;
  __device__ float operator()(float x) const { return x * factor; }
};

// One tensor of a sums_of_squares launch (multi_tensor.cuh); every tensor has the launch's Elem.
struct SquaresTableEntry {
  const void* x;
  long long numel;
  long long first_chunk;
};

// partials[chunk] = sum of x^2 over this block's chunk of its tensor (blockDim == kThreads).
template <class Elem>
__global__ void sums_of_squares_kernel(double* __restrict__ partials,
                                       const SquaresTableEntry* __restrict__ table,
                                       int n_entries) {
  __shared__ double thread_sums[kThreads];
  const long long chunk = blockIdx.x;
  const SquaresTableEntry entry = table[detail::entry_of_chunk(table, n_entries, chunk)];
  const Elem* x = static_cast<const Elem*>(entry.x);
  const long long begin = (chunk - entry.first_chunk) * kReductionChunk;
  const long long end =
      begin + kReductionChunk < entry.numel ? begin + kReductionChunk : entry.numel;
  double sum = 0;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
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
  if (threadIdx.x == 0) partials[chunk] = thread_sums[0];
}

// One tensor of a zero_many launch: its bytes as 4-byte words where its size and address
// allow, else as bytes.
struct ZeroTableEntry {
  void* x;
  long long numel;  // words or bytes
  long long first_chunk;
  int word_size;  // 4 or 1
};

__global__ void zero_many_kernel(const ZeroTableEntry* __restrict__ table, int n_entries) {
  const long long chunk = blockIdx.x;
  const ZeroTableEntry entry = table[detail::entry_of_chunk(table, n_entries, chunk)];
  const long long begin = (chunk - entry.first_chunk) * kReductionChunk;
  const long long end =
      begin + kReductionChunk < entry.numel ? begin + kReductionChunk : entry.numel;
  if (entry.word_size == 4) {
    auto* words = static_cast<std::uint32_t*>(entry.x);
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) words[i] = 0u;
  } else {
    auto* bytes = static_cast<unsigned char*>(entry.x);
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) bytes[i] = 0;
  }
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

// add, accumulate and scale are elementwise_map.cuh's maps: one F32 operation, one rounding.
void add(Tensor& out, const Tensor& a, const Tensor& b) {
  detail::dispatch_float_dtype(out.dtype(), "add", [&](auto elem) {
    using Elem = decltype(elem);
    detail::map2(out.data<Elem>(), a.data<Elem>(), b.data<Elem>(), out.numel(), AddOp{},
                 compute_stream());
  });
}

void accumulate(Tensor& out, const Tensor& x) {
  if (out.dtype() == DType::F32 && x.dtype() == DType::BF16) {
    detail::map2(out.data<float>(), out.data<float>(), x.data<BFloat16>(), out.numel(), AddOp{},
                 compute_stream());
    return;
  }
  detail::dispatch_float_dtype(out.dtype(), "accumulate", [&](auto elem) {
    using Elem = decltype(elem);
    detail::map2(out.data<Elem>(), out.data<Elem>(), x.data<Elem>(), out.numel(), AddOp{},
                 compute_stream());
  });
}

void scale(Tensor& x, float factor) {
  detail::dispatch_float_dtype(x.dtype(), "scale", [&](auto elem) {
    using Elem = decltype(elem);
    detail::map1(x.data<Elem>(), x.data<Elem>(), x.numel(), ScaleOp{factor}, compute_stream());
  });
}

std::vector<double> sums_of_squares(std::span<const Tensor> xs) {
  std::vector<double> sums(xs.size(), 0.0);
  std::vector<SquaresTableEntry> table;
  std::vector<std::size_t> tensor_of_entry;  // empty tensors have no entry
  long long chunks = 0;
  for (std::size_t t = 0; t < xs.size(); ++t) {
    const long long n = xs[t].numel();
    if (n == 0) continue;
    const Tensor& first = xs[tensor_of_entry.empty() ? t : tensor_of_entry.front()];
    TN_CHECK(xs[t].dtype() == first.dtype() && xs[t].device() == first.device(),
             "sums_of_squares (cuda): needs one dtype and device, got ", xs[t].str(), " with ",
             first.str());
    table.push_back({xs[t].raw_data(), n, chunks});
    tensor_of_entry.push_back(t);
    chunks += (n + kReductionChunk - 1) / kReductionChunk;
  }
  if (table.empty()) return sums;

  cudaStream_t stream = compute_stream();
  const Device device = xs[tensor_of_entry.front()].device();
  const detail::DeviceTable<SquaresTableEntry> device_table(table, chunks, device, stream,
                                                            "sums_of_squares");
  // One double per chunk, in an F32 tensor of twice the length (cudaMalloc's blocks are
  // 256-byte aligned).
  Tensor scratch = Tensor::empty({2 * chunks}, DType::F32, device);
  auto* partials = reinterpret_cast<double*>(scratch.data<float>());
  TN_CHECK(reinterpret_cast<std::uintptr_t>(partials) % alignof(double) == 0,
           "sums_of_squares (cuda): scratch is not aligned");
  detail::dispatch_float_dtype(xs[tensor_of_entry.front()].dtype(), "sums_of_squares",
                               [&](auto elem) {
    using Elem = decltype(elem);
    sums_of_squares_kernel<Elem><<<device_table.grid(), kThreads, 0, stream>>>(
        partials, device_table.entries(), device_table.size());
    TN_CUDA_CHECK_LAUNCH();
  });
  std::vector<double> host_partials(static_cast<std::size_t>(chunks));
  TN_CUDA_CHECK(cudaMemcpyAsync(host_partials.data(), partials,
                                host_partials.size() * sizeof(double), cudaMemcpyDeviceToHost,
                                stream));
  TN_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::size_t e = 0; e < table.size(); ++e) {
    const long long end = e + 1 < table.size() ? table[e + 1].first_chunk : chunks;
    double total = 0;
    for (long long c = table[e].first_chunk; c < end; ++c)  // chunk order: deterministic
      total += host_partials[static_cast<std::size_t>(c)];
    sums[tensor_of_entry[e]] = total;
  }
  return sums;
}

void zero_many(std::span<Tensor> xs) {
  std::vector<ZeroTableEntry> table;
  long long chunks = 0;
  for (Tensor& x : xs) {
    const long long bytes = static_cast<long long>(x.nbytes());
    if (bytes == 0) continue;
    const bool words = bytes % 4 == 0 && reinterpret_cast<std::uintptr_t>(x.raw_data()) % 4 == 0;
    const long long n = words ? bytes / 4 : bytes;
    table.push_back({x.raw_data(), n, chunks, words ? 4 : 1});
    chunks += (n + kReductionChunk - 1) / kReductionChunk;
  }
  if (table.empty()) return;
  cudaStream_t stream = compute_stream();
  const detail::DeviceTable<ZeroTableEntry> device_table(table, chunks, xs.front().device(),
                                                         stream, "zero_many");
  zero_many_kernel<<<device_table.grid(), kThreads, 0, stream>>>(device_table.entries(),
                                                                 device_table.size());
  TN_CUDA_CHECK_LAUNCH();
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
