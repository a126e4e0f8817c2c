#include "parallel/comm/device_routing_communicator.h"

#include <cstdint>
#include <utility>

#include "framework/error.h"

namespace ternion {

namespace {

std::string group_context(const Communicator& comm, std::string_view operation) {
  return detail::concat(operation, " on group '", comm.name(), "' (rank ", comm.rank(), " of ",
                        comm.size(), ")");
}

// The two halves of a routing communicator must be the same group.
void check_same_group(const Communicator& host, const Communicator* device,
                      std::string_view what) {
  if (device == nullptr) return;
  TN_CHECK_AS(CommError, host.rank() == device->rank() && host.size() == device->size(),
              what, ": the ", host.backend_name(), " communicator '", host.name(), "' is rank ",
              host.rank(), " of ", host.size(), " but the ", device->backend_name(),
              " one '", device->name(), "' is rank ", device->rank(), " of ", device->size());
}

}  // namespace

DeviceRoutingCommunicator::DeviceRoutingCommunicator(std::unique_ptr<Communicator> host,
                                                     std::unique_ptr<Communicator> device)
    : host_(std::move(host)), device_(std::move(device)) {
  TN_CHECK(host_ != nullptr, "a DeviceRoutingCommunicator needs a host communicator");
  check_same_group(*host_, device_.get(), "routing communicator");
}

std::string DeviceRoutingCommunicator::backend_name() const {
  return device_ ? device_->backend_name() + "+" + host_->backend_name() : host_->backend_name();
}

Communicator& DeviceRoutingCommunicator::route(std::string_view operation,
                                               std::initializer_list<const Tensor*> tensors) {
  return route(operation, std::vector<const Tensor*>(tensors));
}

Communicator& DeviceRoutingCommunicator::route(std::string_view operation,
                                               const std::vector<const Tensor*>& tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;  // the backend names it
    if (first == nullptr) {
      first = t;
      continue;
    }
    TN_CHECK_AS(CommError, t->device().type == first->device().type,
                group_context(*this, operation), ": its tensors are on different devices (",
                first->str(), " and ", t->str(),
                "); one operation's tensors must all be on the CPU (MPI) or all on the GPU (",
                device_ ? device_->backend_name() : std::string("staged MPI"),
                "): copy one of them first");
  }
  const bool on_device = first != nullptr && !first->device().is_cpu();
  return on_device && device_ ? *device_ : *host_;
}

WorkHandle DeviceRoutingCommunicator::all_reduce_async(Tensor& tensor, ReduceOp op) {
  return route("all_reduce", {&tensor}).all_reduce_async(tensor, op);
}

WorkHandle DeviceRoutingCommunicator::all_gather_async(Tensor& out, const Tensor& in) {
  return route("all_gather", {&out, &in}).all_gather_async(out, in);
}

WorkHandle DeviceRoutingCommunicator::reduce_scatter_async(Tensor& out, const Tensor& in,
                                                           ReduceOp op) {
  return route("reduce_scatter", {&out, &in}).reduce_scatter_async(out, in, op);
}

WorkHandle DeviceRoutingCommunicator::broadcast_async(Tensor& tensor, int root) {
  return route("broadcast", {&tensor}).broadcast_async(tensor, root);
}

WorkHandle DeviceRoutingCommunicator::send_async(const Tensor& tensor, int peer, int tag) {
  return route("send", {&tensor}).send_async(tensor, peer, tag);
}

WorkHandle DeviceRoutingCommunicator::recv_async(Tensor& tensor, int peer, int tag) {
  return route("recv", {&tensor}).recv_async(tensor, peer, tag);
}

WorkHandle DeviceRoutingCommunicator::exchange_async(std::vector<P2POp> ops) {
  std::vector<const Tensor*> tensors;
  for (const P2POp& op : ops) tensors.push_back(&op.tensor);
  Communicator& target = route("exchange", tensors);
  return target.exchange_async(std::move(ops));
}

WorkHandle DeviceRoutingCommunicator::barrier_async() { return host_->barrier_async(); }

std::unique_ptr<Communicator> DeviceRoutingCommunicator::split(int color, int key,
                                                               const std::string& name) {
  std::unique_ptr<Communicator> host = host_->split(color, key, name);
  std::unique_ptr<Communicator> device = device_ ? device_->split(color, key, name) : nullptr;
  if (host == nullptr) {
    TN_CHECK(device == nullptr, "split into '", name, "': the ", device_->backend_name(),
             " half made a communicator for a rank the ", host_->backend_name(), " half left out");
    return nullptr;
  }
  TN_CHECK(device_ == nullptr || device != nullptr, "split into '", name, "': the ",
           host_->backend_name(), " half made a communicator but the ", device_->backend_name(),
           " half did not");
  return std::make_unique<DeviceRoutingCommunicator>(std::move(host), std::move(device));
}

std::unique_ptr<Communicator> DeviceRoutingCommunicator::split_node_local(
    const std::string& name) {
  std::unique_ptr<Communicator> host = host_->split_node_local(name);
  std::unique_ptr<Communicator> device;
  if (device_) {
    // The device backend cannot see nodes the way MPI does: give it the host's answer. Each
    // node's color is the rank (in this group) of its first member; the key keeps rank order.
    Tensor leader = Tensor::empty({1}, DType::I32);
    leader.data<std::int32_t>()[0] = rank();
    host->broadcast(leader, 0);
    device = device_->split(leader.data<std::int32_t>()[0], rank(), name);
    TN_CHECK(device != nullptr, "split_node_local into '", name, "': no ",
             device_->backend_name(), " communicator");
  }
  return std::make_unique<DeviceRoutingCommunicator>(std::move(host), std::move(device));
}

}  // namespace ternion
