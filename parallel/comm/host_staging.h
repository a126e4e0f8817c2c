// Host staging: a host-only backend (MPI) working on tensors that live on a device.
//
//   HostStaging staging(/*stage_cpu_tensors=*/false);
//   Tensor host = staging.stage(device_tensor, /*copy_in=*/true, /*copy_back=*/true);
//   WorkHandle work = staging.wrap(submit_mpi_operation_on(host));
//   work->wait();   // the result is in device_tensor now
//
// stage() hands back the tensor the host backend should use instead: the tensor itself when it
// is on the CPU, else a CPU tensor of the same shape and dtype. `copy_in` fills it from the
// device tensor at once (Tensor::copy_from, which waits for the kernels that wrote it);
// `copy_back` marks it as an output, copied into the device tensor when the work completes.
//
// The copies back run on the thread that calls wait() or is_completed(), never on the MPI
// progress thread, so that thread makes no CUDA call. A device result is therefore in place
// once wait() returned (or is_completed() answered true), not merely when MPI finished.
//
// Only Tensor is used here (no CUDA header), so every build compiles it; `stage_cpu_tensors`
// sends CPU tensors through the same path, which is how CPU-only tests exercise it.
#pragma once

#include <exception>
#include <utility>
#include <vector>

#include "framework/tensor.h"
#include "parallel/comm/work.h"

namespace ternion {

class HostStaging {
 public:
  explicit HostStaging(bool stage_cpu_tensors = false) : stage_cpu_tensors_(stage_cpu_tensors) {}

  // Whether `t` goes through a host copy.
  bool needs_staging(const Tensor& t) const { return stage_cpu_tensors_ || !t.device().is_cpu(); }
  // The tensor the host backend uses in place of `t` (see above).
  Tensor stage(const Tensor& t, bool copy_in, bool copy_back);
  // Registers `host` (a CPU tensor the caller staged itself, e.g. a view into another staged
  // tensor) to be copied into `device` on completion.
  void copy_back_later(Tensor device, Tensor host);
  // The Work to hand out: `host_work` itself when nothing needs copying back, else a wrapper
  // that copies the outputs back on completion.
  WorkHandle wrap(WorkHandle host_work);

 private:
  bool stage_cpu_tensors_;
  std::vector<std::pair<Tensor, Tensor>> copies_back_;  // (device tensor, its host copy)
};

// The wrapper: completes when the host work has, and its copies back are done.
class HostStagedWork final : public Work {
 public:
  HostStagedWork(WorkHandle host_work, std::vector<std::pair<Tensor, Tensor>> copies_back)
      : host_work_(std::move(host_work)), copies_back_(std::move(copies_back)) {}

  bool is_completed() override;  // does the copies back once the host work has completed
  void wait() override;          // waits for the host work, copies back, rethrows its error

 private:
  void finish();  // host work complete: copy back (on success) and keep any error for wait()

  WorkHandle host_work_;
  std::vector<std::pair<Tensor, Tensor>> copies_back_;
  bool finished_ = false;
  std::exception_ptr error_;
};

}  // namespace ternion
