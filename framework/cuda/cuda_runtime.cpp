#include "framework/cuda/cuda_runtime.h"

#include <atomic>
#include <mutex>
#include <utility>

#include "framework/cuda/cuda_allocator.h"
#include "framework/cuda/cuda_check.h"
#include "framework/error.h"

namespace ternion::cuda {

namespace {
// The process's one-time runtime state: written once inside `initialize` (under call_once),
// published by the release store to `g_initialized`, read-only afterwards.
struct RuntimeState {
  int device = -1;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
};
RuntimeState g_state;
std::atomic<bool> g_initialized{false};
std::once_flag g_init_once;
// The device this host thread has selected with cudaSetDevice (-1: not yet).
thread_local int t_bound_device = -1;

const RuntimeState& state() {
  TN_CHECK_AS(CudaError, g_initialized.load(std::memory_order_acquire),
              "the CUDA runtime is not initialised in this process (call init_cuda_device)");
  if (t_bound_device != g_state.device) {
    TN_CUDA_CHECK(cudaSetDevice(g_state.device));
    t_bound_device = g_state.device;
  }
  return g_state;
}
}  // namespace

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: leave no error behind for later checks
    return 0;
  }
  return count;
}

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(status) +
           ": " + cudaGetErrorString(status) + ")";
  }
  if (count == 0) return "no CUDA device visible (cudaGetDeviceCount returned 0)";
  return "";
}

int initialize(int local_rank) {
  std::call_once(g_init_once, [local_rank] {
    // If anything here throws, call_once lets a later call try again.
    TN_CHECK_AS(CudaError, local_rank >= 0, "CUDA initialisation: negative local rank ",
                local_rank);
    const int count = device_count();
    TN_CHECK_AS(CudaError, count > 0, "cannot initialise CUDA: ", unavailable_reason());
    const int device = local_rank % count;
    TN_CUDA_CHECK(cudaSetDevice(device));
    // Non-blocking: neither stream synchronises with the legacy default stream, so a stray
    // default-stream call elsewhere cannot serialise compute and communication. The streams live
    // as long as the process (destroying them during static destruction, after the runtime may
    // have shut down, would fail).
    cudaStream_t compute = nullptr, comm = nullptr;
    TN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    TN_CUDA_CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
    install_device_allocator(device);
    g_state = RuntimeState{device, compute, comm};
    t_bound_device = device;
    g_initialized.store(true, std::memory_order_release);
  });
  return current_device();
}

bool initialized() noexcept { return g_initialized.load(std::memory_order_acquire); }

int current_device() { return state().device; }

void bind_this_thread() { (void)state(); }

cudaStream_t compute_stream() { return state().compute; }
cudaStream_t comm_stream() { return state().comm; }

void synchronize_compute() { TN_CUDA_CHECK(cudaStreamSynchronize(state().compute)); }

Event::Event(bool timing) {
  bind_this_thread();
  TN_CUDA_CHECK(
      cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

float Event::milliseconds_since(const Event& start) const {
  TN_CHECK(event_ != nullptr && start.event_ != nullptr, "timing a moved-from Event");
  synchronize();
  float ms = 0.0f;
  TN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

Event::~Event() {
  if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) (void)cudaGetLastError();
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) (void)cudaGetLastError();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(cudaStream_t stream) {
  TN_CHECK(event_ != nullptr, "record of a moved-from Event");
  bind_this_thread();
  TN_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::make_wait(cudaStream_t stream) const {
  TN_CHECK(event_ != nullptr, "wait on a moved-from Event");
  bind_this_thread();
  TN_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

bool Event::query() const {
  TN_CHECK(event_ != nullptr, "query of a moved-from Event");
  bind_this_thread();
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error: leave none behind
    return false;
  }
  TN_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  TN_CHECK(event_ != nullptr, "synchronize on a moved-from Event");
  bind_this_thread();
  TN_CUDA_CHECK(cudaEventSynchronize(event_));
}

void stream_wait(cudaStream_t waiter, cudaStream_t producer) {
  // The wait captures the event's state when it is enqueued, so the event may be destroyed
  // right after (CUDA releases it once the device has passed it).
  Event event;
  event.record(producer);
  event.make_wait(waiter);
}

MemoryStats memory_stats() {
  const CachingAllocator* allocator = device_caching_allocator();
  if (allocator == nullptr) return {};  // nothing allocated on the device yet
  return MemoryStats{allocator->bytes_in_use(), allocator->peak_bytes_in_use(),
                     allocator->bytes_reserved()};
}

std::size_t total_memory() {
  state();  // binds this thread to the process's device
  std::size_t free = 0, total = 0;
  TN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total;
}

void reset_peak_memory() {
  if (CachingAllocator* allocator = device_caching_allocator()) allocator->reset_peak();
}

}  // namespace ternion::cuda
