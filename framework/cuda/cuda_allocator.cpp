#include "framework/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <new>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/device.h"
#include "framework/error.h"

namespace ternion::cuda {

namespace {
// cudaMalloc is slow anyway (and only runs on a cache miss), so asking which device the thread
// uses is not worth caching here; communication threads allocate too.
void use_device(int device) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return;
  TN_CUDA_CHECK(cudaSetDevice(device));
}
}  // namespace

void* CudaDeviceAllocator::allocate(std::size_t bytes) {
  use_device(device_);
  void* ptr = nullptr;
  // Zero-byte tensors still get a distinct, valid pointer (cudaMalloc(0) would return null).
  const cudaError_t status = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky, but clear it so the next launch check is clean
    throw std::bad_alloc();
  }
  if (status != cudaSuccess)
    TN_THROW(CudaError, "cudaMalloc(", bytes, " bytes) on cuda:", device_,
             " failed: ", cudaGetErrorString(status));
  return ptr;
}

void CudaDeviceAllocator::deallocate(void* ptr, std::size_t) noexcept {
  // Blocks come here from the cache (its release after an out-of-memory), so their tensors are
  // gone but kernels queued for them on the compute stream may not have run yet. The runtime
  // API says only that cudaFree "may" synchronise, so wait for the compute stream, which every
  // use of a cached block is ordered on (see the header), before freeing.
  // Destructors never throw: a failure here leaks the block.
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device_) (void)cudaSetDevice(device_);
  try {
    if (cudaStreamSynchronize(compute_stream()) != cudaSuccess) (void)cudaGetLastError();
  } catch (...) {  // the runtime is not initialised: then nothing was queued on its streams
  }
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

namespace {
std::atomic<CachingAllocator*> g_device_caching{nullptr};
std::once_flag g_install_once;
}  // namespace

CachingAllocator& install_device_allocator(int device) {
  std::call_once(g_install_once, [device] {
    // Deliberately leaked, like the CPU's: storage may be freed during static destruction, and
    // freeing device memory after the CUDA runtime has shut down fails.
    auto* backing = new CudaDeviceAllocator(device);
    auto* caching = new CachingAllocator(*backing);
    set_allocator(Device::cuda(device), caching);
    g_device_caching.store(caching, std::memory_order_release);
  });
  return *g_device_caching.load(std::memory_order_acquire);
}

CachingAllocator* device_caching_allocator() noexcept {
  return g_device_caching.load(std::memory_order_acquire);
}

}  // namespace ternion::cuda
