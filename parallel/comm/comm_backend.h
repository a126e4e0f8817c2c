// Which backend carries GPU tensors, and the world communicator built from that choice.
//
//   CommBackend backend = config.parallel.comm_backend(/*cuda_tensors=*/device.type == CUDA);
//   std::unique_ptr<Communicator> world = make_world_communicator(backend);
//
//   Mpi   the MPI world for every tensor; CUDA tensors are staged through host memory
//         (mpi_communicator.h). Works with several ranks on one GPU; CPU runs always use it.
//   Nccl  NCCL for CUDA tensors, MPI for CPU tensors (device_routing_communicator.h). Needs a
//         CUDA build and one GPU per rank (NCCL refuses two ranks of a group on one device).
#pragma once

#include <memory>
#include <string_view>

#include "parallel/comm/communicator.h"

namespace ternion {

enum class CommBackend { Mpi, Nccl };

// "mpi" or "nccl"; anything else throws ConfigError naming the choices.
CommBackend parse_comm_backend(std::string_view name);
const char* comm_backend_name(CommBackend backend);  // "mpi", "nccl"

// The world communicator for `backend`. Collective over MPI_COMM_WORLD (MPI must be
// initialised: MpiRuntime). For Nccl the CUDA runtime must be initialised first (each rank on
// its device); in a CPU-only build Nccl throws ConfigError.
std::unique_ptr<Communicator> make_world_communicator(CommBackend backend);

// Throws (CommError) the first failure that the process's communication recorded in the
// background: the NCCL watchdog's (an asynchronous error, a timeout, then an abort), whose Work
// handles do not block the host. For host code that has just synchronised with the device and
// is about to act on what it read (after an abort those values are garbage). MPI reports its
// failures through wait(), so with MPI alone (and in CPU-only builds) it never throws.
void check_communication_health();

}  // namespace ternion
