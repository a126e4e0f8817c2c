#include "optimizers/adamw.h"

#include "kernels/adamw.h"

namespace ternion {

AdamW::AdamW(const OptimizerConfig& config, std::vector<Parameter*> params)
    : config_(config), params_(std::move(params)) {
  for (Parameter* p : params_) {
    m_.push_back(Tensor::zeros(p->value.shape(), DType::F32, p->value.device()));
    v_.push_back(Tensor::zeros(p->value.shape(), DType::F32, p->value.device()));
  }
}

void AdamW::step(float lr, float grad_scale, std::int64_t step) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    AdamWHyper h;
    h.lr = lr;
    h.beta1 = static_cast<float>(config_.beta1);
    h.beta2 = static_cast<float>(config_.beta2);
    h.eps = static_cast<float>(config_.eps);
    h.weight_decay = p.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    h.grad_scale = grad_scale;
    h.step = step;
    adamw_update(p.value, p.grad, m_[i], v_[i], h);
  }
}

std::size_t AdamW::state_bytes() const {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < m_.size(); ++i) bytes += m_[i].nbytes() + v_[i].nbytes();
  return bytes;
}

}  // namespace ternion
