// The device runtime as the rest of Ternion sees it, in every build: a build without CUDA
// answers "no devices" and refuses to initialise one with a clear message, so callers (the
// trainer, the gpu tests) need no #if.
#pragma once

#include <cstddef>
#include <string>

#include "framework/device.h"

namespace ternion {

// CUDA devices this process can use: 0 in a CPU-only build or without a driver or GPU.
int cuda_device_count() noexcept;
// Why no CUDA device is usable ("built without CUDA", "no CUDA device visible"); empty if one is.
std::string cuda_unavailable_reason();
// Binds this rank to CUDA device (node_local_rank % count) and returns it; throws CudaError
// with the reason when no device is usable.
Device init_cuda_device(int node_local_rank);
// Waits until the device has finished all work enqueued by this process (no-op for the CPU).
void device_synchronize(Device device);

struct DeviceMemoryStats {
  std::size_t in_use = 0, peak = 0, reserved = 0;
};
// The caching allocator's figures for `device` (the CPU's, or the CUDA device's).
DeviceMemoryStats device_memory_stats(Device device);
void reset_device_peak_memory(Device device);

}  // namespace ternion
