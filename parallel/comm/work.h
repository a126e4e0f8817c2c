// A handle on one asynchronous communication operation (PyTorch c10d's Work).
//
//   is_completed()  never blocks; true once the operation has finished (or failed)
//   wait()          blocks until it has finished; rethrows its error (CommError) if it failed
//
// On CPU (MPI) the operation runs on the communicator's progress thread, so computation on
// the calling thread overlaps it. The CUDA/NCCL backend adds synchronize() semantics
// (make the compute stream wait) behind the same interface.
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

}  // namespace ternion
