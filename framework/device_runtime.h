// The device runtime as the rest of Ternion sees it, in every build: a build without CUDA
// answers "no devices" and refuses to initialise one with a clear message, so callers (the
// trainer, the gpu tests) need no #if.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
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

// A point on a device's timeline, so that a step's phases can be timed without waiting inside
// the step: the host clock on the CPU (whose ops have finished when they return); on a GPU a
// timing event recorded on the compute stream (the work enqueued so far), read after the step
// has synchronised anyway.
class DeviceTimestamp {
 public:
  DeviceTimestamp() = default;
  bool valid() const { return valid_; }

 private:
  friend DeviceTimestamp record_timestamp(Device device);
  friend double milliseconds_between(const DeviceTimestamp& start, const DeviceTimestamp& end);
  bool valid_ = false;
  std::chrono::steady_clock::time_point host_;
  std::shared_ptr<void> gpu_event_;  // a cuda::Event (timing) on a GPU; empty on the CPU
};
DeviceTimestamp record_timestamp(Device device);
// end - start in milliseconds (both from one device); on a GPU waits for `end`'s event.
double milliseconds_between(const DeviceTimestamp& start, const DeviceTimestamp& end);

struct DeviceMemoryStats {
  std::size_t in_use = 0, peak = 0, reserved = 0;
};
// The caching allocator's figures for `device` (the CPU's, or the CUDA device's).
DeviceMemoryStats device_memory_stats(Device device);
void reset_device_peak_memory(Device device);
// The memory `device` has: the machine's physical memory for the CPU, the GPU's for a CUDA
// device; 0 when unknown (and for the meta device, which has none).
std::size_t device_total_memory(Device device);

}  // namespace ternion
