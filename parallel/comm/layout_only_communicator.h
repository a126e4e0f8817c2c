// Rank r of a group of n that cannot communicate: what layers are built over when a dry run
// builds, shapes only (framework/parameter.h: ShapeOnlyParameters), the shard each rank of a
// layout would hold, all of them on one process. Every operation throws CommError.
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace ternion {

class LayoutOnlyCommunicator : public Communicator {
 public:
  LayoutOnlyCommunicator(int rank, int size, std::string name = "layout-only");

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
  [[noreturn]] void refuse(const char* operation) const;
  int rank_, size_;
  std::string name_;
};

}  // namespace ternion
