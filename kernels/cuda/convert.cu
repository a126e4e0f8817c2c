// F32 <-> BF16 on the GPU (contract in kernels/convert.h): bfloat16.h's round-to-nearest-even,
// the function the CPU uses, so both devices give the same bits. Equal dtypes copy.
// convert_many_f32_to_bf16 is a multi-tensor apply (multi_tensor.cuh): one block per chunk of
// kChunk elements of the concatenated tensors, so refreshing a model's ~150 compute copies
// after an optimizer step is one launch, not one each.
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

struct IdentityOp {  // the conversion is the map's rounding to out's dtype
  __device__ float operator()(float x) const { return x; }
};

constexpr long long kChunk = 1 << 16;  // elements per block of the multi-tensor kernel

struct ConvertTableEntry {
  BFloat16* out;
  const float* in;
  long long numel;
  long long first_chunk;
};

__global__ void convert_many_kernel(const ConvertTableEntry* __restrict__ table, int n_entries) {
  const long long chunk = blockIdx.x;
  const ConvertTableEntry entry = table[detail::entry_of_chunk(table, n_entries, chunk)];
  const long long begin = (chunk - entry.first_chunk) * kChunk;
  const long long end = begin + kChunk < entry.numel ? begin + kChunk : entry.numel;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x)
    entry.out[i] = detail::from_float<BFloat16>(entry.in[i]);
}

}  // namespace

void convert_many_f32_to_bf16(std::span<Tensor> outs, std::span<const Tensor> ins) {
  std::vector<ConvertTableEntry> table;
  long long chunks = 0;
  for (std::size_t t = 0; t < outs.size(); ++t) {
    const long long n = outs[t].numel();
    if (n == 0) continue;
    table.push_back({outs[t].data<BFloat16>(), ins[t].data<float>(), n, chunks});
    chunks += (n + kChunk - 1) / kChunk;
  }
  if (table.empty()) return;
  cudaStream_t stream = compute_stream();
  const detail::DeviceTable<ConvertTableEntry> device_table(table, chunks, outs.front().device(),
                                                            stream, "convert_many");
  convert_many_kernel<<<device_table.grid(), detail::kThreads, 0, stream>>>(
      device_table.entries(), device_table.size());
  TN_CUDA_CHECK_LAUNCH();
}

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
    detail::map1(out.data<BFloat16>(), in.data<float>(), n, IdentityOp{}, stream);
  } else if (out.dtype() == DType::F32 && in.dtype() == DType::BF16) {
    detail::map1(out.data<float>(), in.data<BFloat16>(), n, IdentityOp{}, stream);
  } else {
    TN_THROW(InternalError, "convert (cuda): no conversion from ", in.str(), " to ", out.str());
  }
}

}  // namespace ternion::cuda
