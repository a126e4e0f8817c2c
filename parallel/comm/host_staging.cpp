#include "parallel/comm/host_staging.h"

namespace ternion {

Tensor HostStaging::stage(const Tensor& t, bool copy_in, bool copy_back) {
  if (!needs_staging(t)) return t;
  Tensor host = Tensor::empty(t.shape(), t.dtype(), Device::cpu());
  if (copy_in) host.copy_from(t);
  if (copy_back) copy_back_later(t, host);
  return host;
}

void HostStaging::copy_back_later(Tensor device, Tensor host) {
  copies_back_.emplace_back(std::move(device), std::move(host));
}

WorkHandle HostStaging::wrap(WorkHandle host_work) {
  if (copies_back_.empty()) return host_work;
  return std::make_shared<HostStagedWork>(std::move(host_work), std::move(copies_back_));
}

bool HostStagedWork::is_completed() {
  if (finished_) return true;
  if (!host_work_->is_completed()) return false;
  finish();
  return true;
}

void HostStagedWork::wait() {
  if (!finished_) finish();
  if (error_) std::rethrow_exception(error_);
}

void HostStagedWork::finish() {
  try {
    host_work_->wait();  // returns at once when complete; rethrows the operation's error
    for (auto& [device, host] : copies_back_) device.copy_from(host);
  } catch (...) {
    error_ = std::current_exception();
  }
  copies_back_.clear();  // the host buffers go, the device tensors stay with their owners
  host_work_.reset();
  finished_ = true;
}

}  // namespace ternion
