// What the multi-tensor kernels (adamw_update_many, sums_of_squares) share. The host writes a
// table of tensors, one entry each, cut into chunks of a fixed number of elements; an entry's
// `first_chunk` counts the chunks of the entries before it, so it increases strictly along the
// table. Block b of the one launch works on chunk b of the concatenation. DeviceTable puts the
// host's table on the device for the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "framework/error.h"
#include "framework/tensor.h"
#include "kernels/cuda/pinned_staging.h"

namespace ternion::cuda::detail {

// The index of the entry holding `chunk`: the last whose first_chunk is <= chunk.
template <class Entry>
__device__ inline int entry_of_chunk(const Entry* __restrict__ table, int n_entries,
                                     long long chunk) {
  int lo = 0, hi = n_entries - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].first_chunk <= chunk) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// A multi-tensor launch's table on the device, and its grid (one block per chunk). The buffer
// comes from the caching allocator (the same size every step, so the same cached block, which
// only work enqueued after the launch can reuse) and is filled through pinned staging, so the
// host does not wait. Keep the DeviceTable until the launch is enqueued.
template <class Entry>
class DeviceTable {
 public:
  DeviceTable(const std::vector<Entry>& table, long long chunks, Device device,
              cudaStream_t stream, const char* op) {
    TN_CHECK(chunks <= 2147483647LL && table.size() <= 2147483647u, op, " (cuda): ", chunks,
             " chunks of ", table.size(), " tensors exceed the grid");
    const std::size_t bytes = table.size() * sizeof(Entry);
    buffer_ = Tensor::empty(
        {static_cast<std::int64_t>((bytes + sizeof(std::int32_t) - 1) / sizeof(std::int32_t))},
        DType::I32, device);
    entries_ = reinterpret_cast<Entry*>(buffer_.data<std::int32_t>());
    TN_CHECK(reinterpret_cast<std::uintptr_t>(entries_) % alignof(Entry) == 0, op,
             " (cuda): the table's buffer is not aligned");
    copy_table_to_device(entries_, table.data(), bytes, stream);
    size_ = static_cast<int>(table.size());
    grid_ = static_cast<unsigned>(chunks);
  }
  const Entry* entries() const { return entries_; }
  int size() const { return size_; }
  unsigned grid() const { return grid_; }

 private:
  Tensor buffer_;
  Entry* entries_ = nullptr;
  int size_ = 0;
  unsigned grid_ = 0;
};

}  // namespace ternion::cuda::detail
