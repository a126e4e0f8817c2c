#include "kernels/cuda/pinned_staging.h"

#include <cstring>
#include <mutex>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"

namespace ternion::cuda {

namespace {

// An event recorded after each copy says when the buffer may be overwritten.
class PinnedTableStaging {
 public:
  void copy_to_device(void* device_dst, const void* src, std::size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (copy_pending_) copy_done_.synchronize();  // the previous copy has read the buffer
    copy_pending_ = false;
    if (bytes > capacity_) {
      if (host_ != nullptr) TN_CUDA_CHECK(cudaFreeHost(host_));
      host_ = nullptr;
      capacity_ = 0;
      TN_CUDA_CHECK(cudaMallocHost(&host_, bytes));
      capacity_ = bytes;
    }
    std::memcpy(host_, src, bytes);
    TN_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_, bytes, cudaMemcpyHostToDevice, stream));
    copy_done_.record(stream);
    copy_pending_ = true;
  }

 private:
  std::mutex mutex_;
  void* host_ = nullptr;
  std::size_t capacity_ = 0;
  Event copy_done_;
  bool copy_pending_ = false;
};

// Created on first use (after the runtime is initialised) and never destroyed: freeing pinned
// memory during static destruction, after the CUDA runtime may have shut down, would fail.
PinnedTableStaging& table_staging() {
  static PinnedTableStaging* staging = new PinnedTableStaging();
  return *staging;
}

}  // namespace

void copy_table_to_device(void* device_dst, const void* src, std::size_t bytes,
                          cudaStream_t stream) {
  if (bytes == 0) return;
  table_staging().copy_to_device(device_dst, src, bytes, stream);
}

}  // namespace ternion::cuda
