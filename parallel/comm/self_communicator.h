// The communicator of a process alone (rank 0 of 1): every collective is what it is on one
// rank (all-reduce and broadcast leave the tensor as it is, all-gather and reduce-scatter
// copy), split gives another such communicator, and a point-to-point operation, which has no
// peer, is refused. It makes the one-rank run the one-rank case of the parallel path
// (ProcessGroups::one_rank), with no MPI underneath.
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace ternion {

class SelfCommunicator : public Communicator {
 public:
  explicit SelfCommunicator(std::string name = "self") : name_(std::move(name)) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  std::string backend_name() const override { return "self"; }

  WorkHandle all_reduce_async(Tensor& tensor, ReduceOp op) override;
  WorkHandle all_gather_async(Tensor& out, const Tensor& in) override;
  WorkHandle reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp op) override;
  WorkHandle broadcast_async(Tensor& tensor, int root) override;
  WorkHandle send_async(const Tensor& tensor, int peer, int tag) override;
  WorkHandle recv_async(Tensor& tensor, int peer, int tag) override;
  WorkHandle exchange_async(std::vector<P2POp> ops) override;
  WorkHandle barrier_async() override;
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;
  std::unique_ptr<Communicator> split_node_local(const std::string& name) override;

 private:
  std::string name_;
};

}  // namespace ternion
