// The caching allocator behind Device::cuda storage.
//
// `CudaDeviceAllocator` is the backing allocator (cudaMalloc / cudaFree on one device); the
// generic `CachingAllocator` (framework/allocator.h) sits on top of it, so a training step that
// allocates the same activation sizes every step reuses cached blocks instead of paying for
// cudaMalloc (slow) and cudaFree (which synchronises the whole device) every step.
//
// Why reusing a block as soon as its tensor dies is safe without per-stream bookkeeping:
//   * every kernel and every Tensor copy runs on the one compute stream, so work enqueued for
//     the block's next owner runs after all work enqueued for its previous owner;
//   * work on a communicator's stream (NCCL) reads and writes tensors that the communicator
//     holds alive until either the Work's wait() has made the compute stream wait for the
//     operation's event, or the host has seen that event complete; so such a block returns to
//     the cache only once the compute stream is ordered after the operation (or it is over).
// Code that enqueues on another stream must keep that promise (parallel/comm/cuda/
// nccl_communicator.h spells it out as its rules (a) and (b)).
//
// Only CUDA builds include this header.
#pragma once

#include <cstddef>

#include "framework/allocator.h"

namespace ternion::cuda {

// cudaMalloc / cudaFree on `device`, from whichever host thread calls (it sets the device).
// Out of memory throws std::bad_alloc (CachingAllocator then releases its cache and retries
// once); every other failure throws CudaError.
class CudaDeviceAllocator final : public Allocator {
 public:
  explicit CudaDeviceAllocator(int device) : device_(device) {}
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;

 private:
  int device_;
};

// Creates the process's caching device allocator for `device` (once; later calls return the
// same one) and installs it with set_allocator(Device::cuda(device), ...).
CachingAllocator& install_device_allocator(int device);
// The installed caching allocator, or null before `install_device_allocator`.
CachingAllocator* device_caching_allocator() noexcept;

}  // namespace ternion::cuda
