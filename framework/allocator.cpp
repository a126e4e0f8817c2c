#include "framework/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "framework/error.h"

namespace ternion {

void* HostAllocator::allocate(std::size_t bytes) {
  constexpr std::size_t kAlignment = 64;
  std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (ptr == nullptr) throw std::bad_alloc();
  return ptr;
}

void HostAllocator::deallocate(void* ptr, std::size_t) noexcept { std::free(ptr); }

CachingAllocator::~CachingAllocator() { release_cached(); }

std::size_t CachingAllocator::block_size(std::size_t bytes) {
  // Small sizes are rounded to 512 bytes, large ones to 1/16 of their power of two, so blocks
  // of nearly equal size (different sequence lengths, say) are shared without wasting much.
  if (bytes <= 4096) return (bytes + 511) / 512 * 512;
  std::size_t power = 1;
  while (power < bytes) power <<= 1;
  std::size_t granule = power / 16;
  return (bytes + granule - 1) / granule * granule;
}

void* CachingAllocator::allocate(std::size_t bytes) {
  std::size_t size = block_size(bytes);
  {
    std::lock_guard lock(mutex_);
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      cached_ -= size;
      in_use_ += size;
      if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
      return ptr;
    }
  }
  void* ptr = nullptr;
  try {
    ptr = backing_.allocate(size);
  } catch (const std::bad_alloc&) {
    release_cached();  // fragmentation: give everything back and try once more
    ptr = backing_.allocate(size);
  }
  std::lock_guard lock(mutex_);
  in_use_ += size;
  if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, std::size_t bytes) noexcept {
  std::size_t size = block_size(bytes);
  std::lock_guard lock(mutex_);
  try {
    free_blocks_[size].push_back(ptr);
    cached_ += size;
  } catch (...) {
    backing_.deallocate(ptr, size);
  }
  in_use_ -= size;
}

void CachingAllocator::release_cached() noexcept {
  // Freed outside the lock: a device allocator's deallocate may wait for the device, and a
  // thread freeing a block meanwhile (an NCCL watchdog releasing a finished operation's
  // tensors) must not wait behind it.
  std::map<std::size_t, std::vector<void*>> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks.swap(free_blocks_);
    cached_ = 0;
  }
  for (auto& [size, ptrs] : blocks) {
    for (void* ptr : ptrs) backing_.deallocate(ptr, size);
  }
}

std::size_t CachingAllocator::bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}
std::size_t CachingAllocator::peak_bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return peak_in_use_;
}
void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  peak_in_use_ = in_use_;
}

std::size_t CachingAllocator::bytes_reserved() const {
  std::lock_guard lock(mutex_);
  return in_use_ + cached_;
}

void* MetaAllocator::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  in_use_ += CachingAllocator::block_size(bytes);
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return nullptr;
}

void MetaAllocator::deallocate(void*, std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  in_use_ -= CachingAllocator::block_size(bytes);
}

std::size_t MetaAllocator::bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}
std::size_t MetaAllocator::peak_bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return peak_in_use_;
}
void MetaAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  peak_in_use_ = in_use_;
}

MetaAllocator& meta_allocator() {
  static MetaAllocator* meta = new MetaAllocator();  // leaked, as the CPU's
  return *meta;
}

namespace {
// One allocator per device type; CUDA's is installed by the CUDA runtime when it initialises.
Allocator* g_allocators[3] = {nullptr, nullptr, nullptr};
}

CachingAllocator& cpu_caching_allocator() {
  // Deliberately leaked: storage may be freed during static destruction.
  static HostAllocator* host = new HostAllocator();
  static CachingAllocator* caching = new CachingAllocator(*host);
  return *caching;
}

Allocator& allocator_for(Device device) {
  Allocator* allocator = g_allocators[static_cast<int>(device.type)];
  if (allocator != nullptr) return *allocator;
  if (device.is_meta()) return meta_allocator();
  TN_CHECK_AS(CudaError, device.is_cpu(), "no allocator for ", device.str(),
              ": the CUDA runtime is not initialised in this process");
  return cpu_caching_allocator();
}

void set_allocator(Device device, Allocator* allocator) {
  g_allocators[static_cast<int>(device.type)] = allocator;
}

}  // namespace ternion
