// Rank r of a group of n that moves no data: what layers are built over when a dry run
// builds, shapes only (framework/parameter.h: ShapeOnlyParameters), the shard each rank of a
// layout would hold, all of them on one process; and what a rank's training step runs over on
// the meta device (training/memory_estimate.h) to count its memory without its peers.
//
// Every operation checks its sizes as a real group would and completes at once, moving
// nothing: meta tensors hold nothing to move, and a host tensor is left as one rank alone
// would leave it (all-reduce and broadcast keep it; all-gather fills every rank's part with
// this rank's, reduce-scatter keeps this rank's chunk; a receive keeps the buffer). Values
// are meaningless; allocations, shapes and the order of operations are the real ones.
// Splitting is refused: ProcessGroups::layout_only builds the groups from the layout.
// Under an OpCostScope each operation is counted (framework/op_cost.h) with the group's
// name and its members' world ranks, which is how the planner learns what a step sends.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/op_cost.h"
#include "parallel/comm/communicator.h"

namespace ternion {

class LayoutOnlyCommunicator : public Communicator {
 public:
  // `members`: the group's world ranks, where known (for counting; may be empty).
  LayoutOnlyCommunicator(int rank, int size, std::string name = "layout-only",
                         std::vector<int> members = {});

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  std::string backend_name() const override { return "layout-only"; }

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
  void count(CollectiveKind kind, const Tensor& buffer) const;
  int rank_, size_;
  std::string name_;
  std::vector<int> members_;
};

}  // namespace ternion
