// Host-to-device copies of small per-launch tables (the multi-tensor kernels' lists of
// tensors) through one reused pinned buffer. From pinned memory cudaMemcpyAsync is truly
// asynchronous; from pageable memory the runtime may or may not have read the source when it
// returns, so a table on the host stack could not be handed over safely without a sync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace ternion::cuda {

// Copies `bytes` from `src` to `device_dst` on `stream` without blocking the host, except to
// wait for the previous copy to have read the shared buffer (by then it has long run).
// Thread-safe; the buffer grows to the largest table and lives for the process.
void copy_table_to_device(void* device_dst, const void* src, std::size_t bytes,
                          cudaStream_t stream);

}  // namespace ternion::cuda
