#include "optimizers/sgd.h"

#include "kernels/adamw.h"

namespace ternion {

Sgd::Sgd(const OptimizerConfig& config, std::vector<ParameterSegment> segments)
    : config_(config), segments_(std::move(segments)) {
  for (const ParameterSegment& s : segments_)
    momentum_.push_back(Tensor::zeros({s.numel()}, DType::F32, s.param->value.device()));
}

void Sgd::step(float lr, float grad_scale, std::int64_t /*step*/) {
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const ParameterSegment& s = segments_[i];
    const Parameter& p = *s.param;
    SgdHyper h;
    h.lr = lr;
    h.momentum = static_cast<float>(config_.momentum);
    h.weight_decay = p.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    h.grad_scale = grad_scale;
    Tensor value = s.value();
    sgd_update(value, s.grad(), momentum_[i], h);
  }
}

std::size_t Sgd::state_bytes() const {
  std::size_t bytes = 0;
  for (const Tensor& t : momentum_) bytes += t.nbytes();
  return bytes;
}

}  // namespace ternion
