// The process's CUDA runtime: one device per rank, a compute stream and a communication
// stream on it, events between them, and the caching device allocator.
//
// `initialize(local_rank)` binds the process to device local_rank % device_count (ranks on
// one node spread over its GPUs; several ranks may share one GPU), creates both streams and
// installs the caching allocator for Device::cuda(...) storage. Every kernel runs on
// `compute_stream()`; each NCCL communicator runs its operations on a stream of its own after
// waiting for the compute stream, and the compute stream waits for an operation's event before
// it reads the result (llm.c's pattern). `comm_stream()` is the runtime's spare stream for
// copies that should overlap compute. Host code that reads device memory goes
// through Tensor::copy_from, which synchronises the compute stream.
//
// Only CUDA builds include this header; build-agnostic callers use framework/device_runtime.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace ternion::cuda {

// 0 where there is no driver or no device (never throws).
int device_count() noexcept;
// Why no device is usable (the driver's answer); empty when device_count() > 0.
std::string unavailable_reason();
// Binds this process to a device, creates the streams and installs the allocator; returns the
// device index. Calling it again with any rank returns the device already chosen.
int initialize(int local_rank);
bool initialized() noexcept;
int current_device();  // the index `initialize` chose (throws if not initialised)
// cudaSetDevice is per host thread: makes the calling thread use the process's device. Every
// function here does it itself; code that calls CUDA directly from a thread of its own (a
// communication progress thread, say) calls it first. Cheap after the first call per thread.
void bind_this_thread();

cudaStream_t compute_stream();
cudaStream_t comm_stream();
void synchronize_compute();  // blocks until the compute stream is idle; throws on an error

// An owned CUDA event (timing disabled); RAII, movable.
class Event {
 public:
  // `timing`: the event records a time (cudaEventElapsedTime); others are cheaper.
  explicit Event(bool timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(cudaStream_t stream);
  void make_wait(cudaStream_t stream) const;  // `stream` waits for this event (no host block)
  bool query() const;                          // completed? never blocks
  void synchronize() const;                    // blocks the host
  cudaEvent_t get() const { return event_; }
  // Milliseconds from `start` to this event, both timing events; blocks until this completes.
  float milliseconds_since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Makes `waiter` wait for everything enqueued on `producer` so far.
void stream_wait(cudaStream_t waiter, cudaStream_t producer);

struct MemoryStats {
  std::size_t in_use = 0;    // handed out by the allocator, not yet returned
  std::size_t peak = 0;      // highest `in_use` since the last reset
  std::size_t reserved = 0;  // in use plus cached
};
MemoryStats memory_stats();
void reset_peak_memory();
std::size_t total_memory();  // the device's, as cudaMemGetInfo reports it

// Device-side helpers behind Tensor's copies and fills (framework/cuda/tensor_ops.cu). All run
// on the compute stream. `copy_bytes` of a kind that touches host memory (anything but
// cudaMemcpyDeviceToDevice) returns only once the stream has finished, so the host may read or
// reuse its buffer at once; device-to-device copies stay asynchronous. `copy_strided` copies an
// n-dimensional strided block (strides in elements) of `elem`-byte elements (1, 2, 4 or 8)
// within device memory; extent-1 and mergeable dimensions are folded first, and at most 8 may
// remain. Source and destination must not overlap.
void copy_bytes(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
void copy_strided(void* dst, const long long* dst_strides, const void* src,
                  const long long* src_strides, const long long* shape, int dims,
                  std::size_t elem);
void fill_f32(float* dst, float value, std::size_t n);
void zero_bytes(void* dst, std::size_t bytes);

}  // namespace ternion::cuda
