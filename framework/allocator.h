// Pluggable memory allocators, one per device.
//
// Storage asks `allocator_for(device)` for memory. The CPU default is a caching allocator:
// a training step allocates the same activation sizes every step, and returning them to the
// OS (glibc unmaps large blocks) would page-fault them back in on every step. The CUDA backend
// registers its own caching allocator the same way (`set_allocator`).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "framework/device.h"

namespace ternion {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) noexcept = 0;
};

// Plain aligned host memory (64-byte alignment: one cache line, one AVX-512 vector).
class HostAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
};

// Keeps freed blocks in per-size free lists and hands them out again. Thread-safe.
class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(Allocator& backing) : backing_(backing) {}
  ~CachingAllocator() override;
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;

  void release_cached() noexcept;        // return every cached block to the backing allocator
  std::size_t bytes_in_use() const;      // handed out and not yet returned
  std::size_t peak_bytes_in_use() const;
  void reset_peak();                     // the peak restarts from what is in use now
  std::size_t bytes_reserved() const;    // in use plus cached

 private:
  static std::size_t round_up(std::size_t bytes);
  Allocator& backing_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_blocks_;
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
  std::size_t cached_ = 0;
};

Allocator& allocator_for(Device device);
// Installs the allocator used for new storage on `device` (not owned; must outlive its storage).
void set_allocator(Device device, Allocator* allocator);
// The process's default CPU caching allocator (for memory statistics).
CachingAllocator& cpu_caching_allocator();

}  // namespace ternion
