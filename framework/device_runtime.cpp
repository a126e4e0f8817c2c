#include "framework/device_runtime.h"

#include <unistd.h>

#include "framework/allocator.h"
#include "framework/error.h"
#include "framework/features.h"

#if TN_HAVE_CUDA
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#endif

namespace ternion {

namespace {
[[maybe_unused]] constexpr const char* kNoCudaBuild =
    "this build has no CUDA (configure with -DTERNION_CUDA=ON)";

#if TN_HAVE_CUDA
// The process is bound to one device; a Device naming another one is a bug in the caller.
void check_is_process_device(Device device) {
  TN_CHECK_AS(CudaError, cuda::initialized(), device.str(),
              ": the CUDA runtime is not initialised in this process (call init_cuda_device)");
  TN_CHECK_AS(CudaError, device.index == cuda::current_device(), device.str(),
              ": this process is bound to cuda:", cuda::current_device());
}
#endif
}  // namespace

int cuda_device_count() noexcept {
#if TN_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::string cuda_unavailable_reason() {
#if TN_HAVE_CUDA
  return cuda::unavailable_reason();
#else
  return kNoCudaBuild;
#endif
}

Device init_cuda_device(int node_local_rank) {
#if TN_HAVE_CUDA
  if (cuda::device_count() == 0)
    TN_THROW(CudaError, "cannot use a CUDA device: ", cuda::unavailable_reason());
  return Device::cuda(cuda::initialize(node_local_rank));
#else
  (void)node_local_rank;
  TN_THROW(CudaError, "cannot use a CUDA device: ", kNoCudaBuild);
#endif
}

void device_synchronize(Device device) {
  if (device.is_cpu() || device.is_meta()) return;
#if TN_HAVE_CUDA
  check_is_process_device(device);
  // Not cudaDeviceSynchronize: a device-wide wait would also block on an NCCL collective whose
  // peer has not joined yet. The communicators' own streams are reached through the compute
  // stream where they matter: Work::wait makes it wait for the operation. An operation never
  // waited for is not covered (its tensors stay held until its watchdog sees it complete).
  TN_CUDA_CHECK(cudaStreamSynchronize(cuda::compute_stream()));
  TN_CUDA_CHECK(cudaStreamSynchronize(cuda::comm_stream()));
#else
  TN_THROW(CudaError, device.str(), ": ", kNoCudaBuild);
#endif
}

DeviceTimestamp record_timestamp(Device device) {
  DeviceTimestamp t;
  t.valid_ = true;
  if (device.is_cpu() || device.is_meta()) {
    t.host_ = std::chrono::steady_clock::now();
    return t;
  }
#if TN_HAVE_CUDA
  check_is_process_device(device);
  auto event = std::make_shared<cuda::Event>(/*timing=*/true);
  event->record(cuda::compute_stream());
  t.gpu_event_ = std::move(event);
  return t;
#else
  TN_THROW(CudaError, device.str(), ": ", kNoCudaBuild);
#endif
}

double milliseconds_between(const DeviceTimestamp& start, const DeviceTimestamp& end) {
  TN_CHECK(start.valid_ && end.valid_ &&
               (start.gpu_event_ == nullptr) == (end.gpu_event_ == nullptr),
           "milliseconds_between: two timestamps of one device");
  if (start.gpu_event_ == nullptr)
    return std::chrono::duration<double, std::milli>(end.host_ - start.host_).count();
#if TN_HAVE_CUDA
  const auto& start_event = *static_cast<const cuda::Event*>(start.gpu_event_.get());
  const auto& end_event = *static_cast<const cuda::Event*>(end.gpu_event_.get());
  return end_event.milliseconds_since(start_event);
#else
  TN_THROW(InternalError, "milliseconds_between: a GPU timestamp in a build without CUDA");
#endif
}

DeviceMemoryStats device_memory_stats(Device device) {
  if (device.is_meta()) {
    const MetaAllocator& meta = meta_allocator();
    return DeviceMemoryStats{meta.bytes_in_use(), meta.peak_bytes_in_use(), meta.bytes_in_use()};
  }
  if (device.is_cpu()) {
    const CachingAllocator& cpu = cpu_caching_allocator();
    return DeviceMemoryStats{cpu.bytes_in_use(), cpu.peak_bytes_in_use(), cpu.bytes_reserved()};
  }
#if TN_HAVE_CUDA
  check_is_process_device(device);
  const cuda::MemoryStats stats = cuda::memory_stats();
  return DeviceMemoryStats{stats.in_use, stats.peak, stats.reserved};
#else
  TN_THROW(CudaError, device.str(), ": ", kNoCudaBuild);
#endif
}

void reset_device_peak_memory(Device device) {
  if (device.is_meta()) {
    meta_allocator().reset_peak();
    return;
  }
  if (device.is_cpu()) {
    cpu_caching_allocator().reset_peak();
    return;
  }
#if TN_HAVE_CUDA
  check_is_process_device(device);
  cuda::reset_peak_memory();
#else
  TN_THROW(CudaError, device.str(), ": ", kNoCudaBuild);
#endif
}

std::size_t device_total_memory(Device device) {
  if (device.is_meta()) return 0;
  if (device.is_cpu()) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                                 : 0;
  }
#if TN_HAVE_CUDA
  check_is_process_device(device);
  return cuda::total_memory();
#else
  TN_THROW(CudaError, device.str(), ": ", kNoCudaBuild);
#endif
}

}  // namespace ternion
