// A communicator that sends each tensor to the backend for its device: CUDA tensors to the
// device communicator (NCCL), CPU tensors to the host one (MPI). c10d's "cuda:nccl,cpu:gloo".
//
//   auto world = std::make_unique<DeviceRoutingCommunicator>(mpi_world, nccl_world);
//   world->all_reduce(gradients_on_gpu, ReduceOp::Sum);   // NCCL
//   world->all_gather(status_flags_on_cpu, mine);         // MPI
//
// So the trainer's CPU bookkeeping collectives (status agreement, loss flags, node ids) keep
// working unchanged while activations and gradients use NCCL. Without a device communicator
// every tensor goes to the host one (which stages CUDA tensors through host memory).
//
// One operation's tensors must all be on the same kind of device (an all_gather from a CUDA
// tensor into a CPU one, or an exchange mixing both, is refused with a CommError). barrier()
// is the host communicator's: it synchronises the processes, not the device streams.
//
// split and split_node_local split both communicators (host first, then device), so they are
// collective over both, like every other operation: all members call them in the same order.
// The two halves always hold the same ranks in the same order (checked).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/comm/communicator.h"

namespace ternion {

class DeviceRoutingCommunicator final : public Communicator {
 public:
  // `device` may be null (every tensor goes to `host`).
  DeviceRoutingCommunicator(std::unique_ptr<Communicator> host,
                            std::unique_ptr<Communicator> device);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }
  // "nccl+mpi": the device backend, then the host one.
  std::string backend_name() const override;

  Communicator& host() const { return *host_; }
  Communicator* device() const { return device_.get(); }

  WorkHandle all_reduce_async(Tensor& tensor, ReduceOp op) override;
  WorkHandle all_gather_async(Tensor& out, const Tensor& in) override;
  WorkHandle reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp op) override;
  WorkHandle broadcast_async(Tensor& tensor, int root) override;
  WorkHandle send_async(const Tensor& tensor, int peer, int tag = 0) override;
  WorkHandle recv_async(Tensor& tensor, int peer, int tag = 0) override;
  WorkHandle exchange_async(std::vector<P2POp> ops) override;
  WorkHandle barrier_async() override;
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;
  std::unique_ptr<Communicator> split_node_local(const std::string& name) override;

 private:
  // The communicator for an operation on `tensors` (all on one kind of device).
  Communicator& route(std::string_view operation, std::initializer_list<const Tensor*> tensors);
  Communicator& route(std::string_view operation, const std::vector<const Tensor*>& tensors);

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;
};

}  // namespace ternion
