// A handle on one asynchronous communication operation (PyTorch c10d's Work).
//
//   is_completed()  never blocks; true once the operation has finished (or failed; a backend
//                   may instead throw the failure here, as NCCL does)
//   wait()          the result is ready for whatever the caller does next: on CPU (MPI) it
//                   blocks until the operation has finished; rethrows its error (CommError)
//
// On CPU (MPI) the operation runs on the communicator's progress thread, so computation on
// the calling thread overlaps it. The CUDA/NCCL backend gives wait() c10d's synchronize()
// semantics instead: it makes the compute stream wait for the operation and returns without
// blocking the host (errors and hangs are caught by its watchdog and thrown by the next call;
// parallel/comm/cuda/nccl_communicator.h).
#pragma once

#include <memory>

namespace ternion {

class Work {
 public:
  virtual ~Work() = default;
  virtual bool is_completed() = 0;
  virtual void wait() = 0;
};

using WorkHandle = std::shared_ptr<Work>;

// The handle of an operation that completed when it was called (what a one-rank group's and a
// layout-only group's operations return).
class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};
inline WorkHandle completed_work() { return std::make_shared<CompletedWork>(); }

}  // namespace ternion
