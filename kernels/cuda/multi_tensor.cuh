// What the multi-tensor kernels (adamw_update_many, sums_of_squares) share. The host writes a
// table of tensors, one entry each, cut into chunks of a fixed number of elements; an entry's
// `first_chunk` counts the chunks of the entries before it, so it increases strictly along the
// table. Block b of the one launch works on chunk b of the concatenation.
#pragma once

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

}  // namespace ternion::cuda::detail
