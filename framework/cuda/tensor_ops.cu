// Device-side copies and fills behind Tensor (declared in framework/cuda/cuda_runtime.h).
// Everything runs on the compute stream, so it is ordered with every kernel.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/error.h"

namespace ternion::cuda {

namespace {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 65535;  // the kernels loop over the rest (grid-stride)

// Shape and strides (in elements) passed by value: a kernel argument, no device buffer.
struct StridedLayout {
  long long shape[kMaxDims];
  long long dst_strides[kMaxDims];
  long long src_strides[kMaxDims];
  int dims;
};

// Each thread decodes a row-major linear index into coordinates over `shape` (last dimension
// fastest) and copies one element from its source offset to its destination offset.
template <class T>
__global__ void copy_strided_kernel(T* __restrict__ dst, const T* __restrict__ src,
                                    StridedLayout layout, long long n) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    long long rest = i, dst_offset = 0, src_offset = 0;
    for (int d = layout.dims - 1; d >= 0; --d) {
      const long long coord = rest % layout.shape[d];
      rest /= layout.shape[d];
      dst_offset += coord * layout.dst_strides[d];
      src_offset += coord * layout.src_strides[d];
    }
    dst[dst_offset] = src[src_offset];
  }
}

__global__ void fill_f32_kernel(float* __restrict__ dst, float value, long long n) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    dst[i] = value;
}

unsigned blocks_for(long long n) {
  return static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

template <class T>
void launch_copy_strided(void* dst, const void* src, const StridedLayout& layout, long long n) {
  copy_strided_kernel<T><<<blocks_for(n), kThreads, 0, compute_stream()>>>(
      static_cast<T*>(dst), static_cast<const T*>(src), layout, n);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void copy_bytes(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return;
  cudaStream_t stream = compute_stream();
  TN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  // Host code reads (device->host) or reuses (host->device) the host memory right after we
  // return, so a copy that touches the host waits for the stream. Device-to-device copies stay
  // asynchronous, ordered with the kernels on the same stream.
  if (kind != cudaMemcpyDeviceToDevice) TN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void copy_strided(void* dst, const long long* dst_strides, const void* src,
                  const long long* src_strides, const long long* shape, int dims,
                  std::size_t elem) {
  TN_CHECK(dims >= 0, "copy_strided: negative dims ", dims);
  long long n = 1;
  for (int d = 0; d < dims; ++d) n *= shape[d];
  if (n == 0) return;

  // Drop extent-1 dimensions (nothing steps them) and merge each dimension into the one outside
  // it when both sides are laid out contiguously across the pair: fewer dimensions to decode,
  // and a contiguous copy turns into one cudaMemcpyAsync.
  StridedLayout layout{};
  int merged = 0;
  for (int d = 0; d < dims; ++d) {
    if (shape[d] == 1) continue;
    if (merged > 0) {
      const int outer = merged - 1;
      if (layout.dst_strides[outer] == dst_strides[d] * shape[d] &&
          layout.src_strides[outer] == src_strides[d] * shape[d]) {
        layout.shape[outer] *= shape[d];
        layout.dst_strides[outer] = dst_strides[d];
        layout.src_strides[outer] = src_strides[d];
        continue;
      }
    }
    TN_CHECK_AS(CudaError, merged < kMaxDims, "copy_strided: more than ", kMaxDims,
                " dimensions that cannot be merged");
    layout.shape[merged] = shape[d];
    layout.dst_strides[merged] = dst_strides[d];
    layout.src_strides[merged] = src_strides[d];
    ++merged;
  }
  layout.dims = merged;

  if (merged == 0) {  // a single element
    copy_bytes(dst, src, elem, cudaMemcpyDeviceToDevice);
    return;
  }
  if (merged == 1 && layout.dst_strides[0] == 1 && layout.src_strides[0] == 1) {
    copy_bytes(dst, src, static_cast<std::size_t>(n) * elem, cudaMemcpyDeviceToDevice);
    return;
  }
  // Elements are moved as same-sized integers; tensor offsets are whole elements and device
  // allocations are 256-byte aligned, so every access is aligned.
  switch (elem) {
    case 1: launch_copy_strided<std::uint8_t>(dst, src, layout, n); break;
    case 2: launch_copy_strided<std::uint16_t>(dst, src, layout, n); break;
    case 4: launch_copy_strided<std::uint32_t>(dst, src, layout, n); break;
    case 8: launch_copy_strided<std::uint64_t>(dst, src, layout, n); break;
    default: TN_THROW(CudaError, "copy_strided: unsupported element size ", elem);
  }
}

void fill_f32(float* dst, float value, std::size_t n) {
  if (n == 0) return;
  const auto count = static_cast<long long>(n);
  fill_f32_kernel<<<blocks_for(count), kThreads, 0, compute_stream()>>>(dst, value, count);
  TN_CUDA_CHECK_LAUNCH();
}

void zero_bytes(void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  TN_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, compute_stream()));
}

}  // namespace ternion::cuda
