#include "parallel/comm/layout_only_communicator.h"

#include "framework/error.h"

namespace ternion {

LayoutOnlyCommunicator::LayoutOnlyCommunicator(int rank, int size, std::string name)
    : rank_(rank), size_(size), name_(std::move(name)) {
  TN_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of ", size);
}

void LayoutOnlyCommunicator::refuse(const char* operation) const {
  TN_THROW(CommError, name_, ": ", operation, " in a layout-only group (rank ", rank_, " of ",
           size_, "), which describes a layout and cannot communicate");
}

WorkHandle LayoutOnlyCommunicator::all_reduce_async(Tensor&, ReduceOp) { refuse("all_reduce"); }
WorkHandle LayoutOnlyCommunicator::all_gather_async(Tensor&, const Tensor&) {
  refuse("all_gather");
}
WorkHandle LayoutOnlyCommunicator::reduce_scatter_async(Tensor&, const Tensor&, ReduceOp) {
  refuse("reduce_scatter");
}
WorkHandle LayoutOnlyCommunicator::broadcast_async(Tensor&, int) { refuse("broadcast"); }
WorkHandle LayoutOnlyCommunicator::send_async(const Tensor&, int, int) { refuse("send"); }
WorkHandle LayoutOnlyCommunicator::recv_async(Tensor&, int, int) { refuse("receive"); }
WorkHandle LayoutOnlyCommunicator::exchange_async(std::vector<P2POp>) { refuse("exchange"); }
WorkHandle LayoutOnlyCommunicator::barrier_async() { refuse("barrier"); }
std::unique_ptr<Communicator> LayoutOnlyCommunicator::split(int, int, const std::string&) {
  refuse("split");
}
std::unique_ptr<Communicator> LayoutOnlyCommunicator::split_node_local(const std::string&) {
  refuse("split_node_local");
}

}  // namespace ternion
