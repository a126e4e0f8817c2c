#include "optimizers/sgd.h"

#include "kernels/adamw.h"

namespace ternion {

Sgd::Sgd(const OptimizerConfig& config, std::vector<Parameter*> params)
    : config_(config), params_(std::move(params)) {
  for (Parameter* p : params_)
    momentum_.push_back(Tensor::zeros(p->value.shape(), DType::F32, p->value.device()));
}

void Sgd::step(float lr, float grad_scale, std::int64_t /*step*/) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    SgdHyper h;
    h.lr = lr;
    h.momentum = static_cast<float>(config_.momentum);
    h.weight_decay = p.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    h.grad_scale = grad_scale;
    sgd_update(p.value, p.grad, momentum_[i], h);
  }
}

std::size_t Sgd::state_bytes() const {
  std::size_t bytes = 0;
  for (const Tensor& t : momentum_) bytes += t.nbytes();
  return bytes;
}

}  // namespace ternion
