#include "parallel/comm/comm_backend.h"

#include <string>

#include "framework/error.h"
#include "framework/features.h"
#include "parallel/comm/device_routing_communicator.h"
#include "parallel/comm/mpi_runtime.h"

#if TN_HAVE_CUDA
#include "parallel/comm/cuda/nccl_communicator.h"
#endif

namespace ternion {

CommBackend parse_comm_backend(std::string_view name) {
  if (name == "mpi") return CommBackend::Mpi;
  if (name == "nccl") return CommBackend::Nccl;
  TN_THROW(ConfigError, "unknown communication backend '", name, "': nccl or mpi");
}

const char* comm_backend_name(CommBackend backend) {
  return backend == CommBackend::Nccl ? "nccl" : "mpi";
}

std::unique_ptr<Communicator> make_world_communicator(CommBackend backend) {
  if (backend == CommBackend::Mpi) return mpi_world_communicator();
#if TN_HAVE_CUDA
  std::unique_ptr<Communicator> mpi = mpi_world_communicator("world_cpu");
  std::unique_ptr<Communicator> nccl = NcclCommunicator::create(*mpi, "world");
  return std::make_unique<DeviceRoutingCommunicator>(std::move(mpi), std::move(nccl));
#else
  TN_THROW(ConfigError,
           "parallel.backend: nccl needs a CUDA build (this one is CPU-only); use "
           "parallel.backend: mpi");
#endif
}

void check_communication_health() {
#if TN_HAVE_CUDA
  check_nccl_health();
#endif
}

}  // namespace ternion
