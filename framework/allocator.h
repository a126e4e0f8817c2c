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

  // The size of the block that serves a request of `bytes` (what in-use figures count).
  static std::size_t block_size(std::size_t bytes);
  void release_cached() noexcept;        // return every cached block to the backing allocator
  std::size_t bytes_in_use() const;      // handed out and not yet returned
  std::size_t peak_bytes_in_use() const;
  void reset_peak();                     // the peak restarts from what is in use now
  std::size_t bytes_reserved() const;    // in use plus cached

 private:
  Allocator& backing_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_blocks_;
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
  std::size_t cached_ = 0;
};

// The meta device's (framework/device.h): hands out no memory (null) and counts what it would
// have, in the CPU caching allocator's blocks, so a run on the meta device reports the in-use
// and peak figures the same run reports on the CPU.
class MetaAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
  std::size_t bytes_in_use() const;
  std::size_t peak_bytes_in_use() const;
  void reset_peak();

 private:
  mutable std::mutex mutex_;
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
};

Allocator& allocator_for(Device device);
// Installs the allocator used for new storage on `device` (not owned; must outlive its storage).
void set_allocator(Device device, Allocator* allocator);
// The process's default CPU caching allocator (for memory statistics).
CachingAllocator& cpu_caching_allocator();
MetaAllocator& meta_allocator();

}  // namespace ternion
