#include "parallel/comm/layout_only_communicator.h"

#include "framework/error.h"

namespace ternion {

LayoutOnlyCommunicator::LayoutOnlyCommunicator(int rank, int size, std::string name,
                                               std::vector<int> members)
    : rank_(rank), size_(size), name_(std::move(name)), members_(std::move(members)) {
  TN_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of ", size);
  TN_CHECK(members_.empty() || static_cast<int>(members_.size()) == size, name_, ": ",
           members_.size(), " members for a group of ", size);
}

void LayoutOnlyCommunicator::count(CollectiveKind kind, const Tensor& buffer) const {
  if (size_ > 1) record_collective(name_, members_, kind, static_cast<double>(buffer.nbytes()));
}

WorkHandle LayoutOnlyCommunicator::all_reduce_async(Tensor& tensor, ReduceOp) {
  TN_CHECK(tensor.is_contiguous(), name_, ": all_reduce of a non-contiguous ", tensor.str());
  count(CollectiveKind::all_reduce, tensor);
  return completed_work();
}

WorkHandle LayoutOnlyCommunicator::all_gather_async(Tensor& out, const Tensor& in) {
  TN_CHECK(out.is_contiguous() && in.is_contiguous() && out.numel() == size_ * in.numel(), name_,
           ": all_gather of ", in.str(), " into ", out.str(), " over ", size_, " ranks");
  count(CollectiveKind::all_gather, out);
  if (out.device().is_meta()) return completed_work();  // nothing to copy (nor to count as copies)
  const Tensor flat_out = out.view({-1}), flat_in = in.view({-1});
  for (int r = 0; r < size_; ++r) flat_out.slice(0, r * in.numel(), in.numel()).copy_from(flat_in);
  return completed_work();
}

WorkHandle LayoutOnlyCommunicator::reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp) {
  const ChunkRange mine = chunk_range(in.numel(), size_, rank_);
  TN_CHECK(out.is_contiguous() && in.is_contiguous() && out.numel() == mine.size(), name_,
           ": reduce_scatter of ", in.str(), " into ", out.str(), " over ", size_, " ranks");
  count(CollectiveKind::reduce_scatter, in);
  if (out.device().is_meta()) return completed_work();
  out.view({-1}).copy_from(in.view({-1}).slice(0, mine.begin, mine.size()));
  return completed_work();
}

WorkHandle LayoutOnlyCommunicator::broadcast_async(Tensor& tensor, int root) {
  TN_CHECK(root >= 0 && root < size_, name_, ": broadcast from rank ", root, " of ", size_);
  count(CollectiveKind::broadcast, tensor);
  return completed_work();
}

WorkHandle LayoutOnlyCommunicator::send_async(const Tensor& tensor, int peer, int) {
  TN_CHECK(peer >= 0 && peer < size_ && peer != rank_, name_, ": send to rank ", peer);
  count(CollectiveKind::send, tensor);
  return completed_work();
}

WorkHandle LayoutOnlyCommunicator::recv_async(Tensor&, int peer, int) {
  TN_CHECK(peer >= 0 && peer < size_ && peer != rank_, name_, ": receive from rank ", peer);
  return completed_work();
}

WorkHandle LayoutOnlyCommunicator::exchange_async(std::vector<P2POp> ops) {
  for (const P2POp& op : ops) {
    TN_CHECK(op.peer >= 0 && op.peer < size_ && op.peer != rank_, name_,
             ": point-to-point operation with rank ", op.peer);
    if (op.kind == P2POp::Kind::Send) count(CollectiveKind::send, op.tensor);
  }
  return completed_work();
}

WorkHandle LayoutOnlyCommunicator::barrier_async() { return completed_work(); }

std::unique_ptr<Communicator> LayoutOnlyCommunicator::split(int, int, const std::string&) {
  TN_THROW(CommError, name_, ": split of a layout-only group (ProcessGroups::layout_only builds "
           "a rank's groups from its layout)");
}
std::unique_ptr<Communicator> LayoutOnlyCommunicator::split_node_local(const std::string&) {
  TN_THROW(CommError, name_, ": split_node_local of a layout-only group");
}

}  // namespace ternion
