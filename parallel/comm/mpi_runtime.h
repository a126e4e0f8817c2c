// The process's MPI runtime: initialised once (MPI_Init_thread), finalised at exit, and the
// one way to abort the whole job.
//
//   int main(int argc, char** argv) {
//     ternion::MpiRuntime mpi(&argc, &argv);        // RAII: MPI_Finalize in the destructor
//     auto world = ternion::mpi_world_communicator();
//     ...
//   }
//
// A rank that hits an error it cannot share with the others (it would leave them waiting in
// a collective) calls abort_job(message): the message is printed once with the rank, then
// MPI_Abort ends every rank with a non-zero status.
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace ternion {

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  static bool initialized();
  static int world_rank();
  static int world_size();
};

// MPI_COMM_WORLD behind the Communicator interface (named "world"). Collective: it duplicates
// MPI_COMM_WORLD, so every rank calls it, in the same order as its other collectives.
// `name` tells it apart in messages and flight records from another world communicator of the
// same process (one that carries a device world's CPU tensors).
std::unique_ptr<Communicator> mpi_world_communicator(const std::string& name = "world");

[[noreturn]] void abort_job(const std::string& message, int status = 1);

}  // namespace ternion
