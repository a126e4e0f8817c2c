#include "parallel/comm/self_communicator.h"

#include "framework/error.h"

namespace ternion {

WorkHandle SelfCommunicator::all_reduce_async(Tensor& tensor, ReduceOp) {
  TN_CHECK(tensor.is_contiguous(), name_, ": all_reduce of a non-contiguous ", tensor.str());
  return completed_work();
}

WorkHandle SelfCommunicator::all_gather_async(Tensor& out, const Tensor& in) {
  TN_CHECK(out.numel() == in.numel(), name_, ": all_gather of ", in.str(), " into ", out.str());
  out.view({-1}).copy_from(in.view({-1}));
  return completed_work();
}

WorkHandle SelfCommunicator::reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp) {
  TN_CHECK(out.numel() == in.numel(), name_, ": reduce_scatter of ", in.str(), " into ",
           out.str());
  out.view({-1}).copy_from(in.view({-1}));
  return completed_work();
}

WorkHandle SelfCommunicator::broadcast_async(Tensor&, int root) {
  TN_CHECK(root == 0, name_, ": broadcast from rank ", root, " of 1");
  return completed_work();
}

WorkHandle SelfCommunicator::send_async(const Tensor&, int peer, int) {
  TN_THROW(CommError, name_, ": send to rank ", peer, " of a one-rank group");
}

WorkHandle SelfCommunicator::recv_async(Tensor&, int peer, int) {
  TN_THROW(CommError, name_, ": receive from rank ", peer, " of a one-rank group");
}

WorkHandle SelfCommunicator::exchange_async(std::vector<P2POp> ops) {
  TN_CHECK_AS(CommError, ops.empty(), name_, ": point-to-point operations in a one-rank group");
  return completed_work();
}

WorkHandle SelfCommunicator::barrier_async() { return completed_work(); }

std::unique_ptr<Communicator> SelfCommunicator::split(int color, int, const std::string& name) {
  if (color < 0) return nullptr;
  return std::make_unique<SelfCommunicator>(name);
}

std::unique_ptr<Communicator> SelfCommunicator::split_node_local(const std::string& name) {
  return std::make_unique<SelfCommunicator>(name);
}

}  // namespace ternion
