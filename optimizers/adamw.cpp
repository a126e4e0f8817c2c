#include "optimizers/adamw.h"

#include "kernels/adamw.h"

namespace ternion {

AdamW::AdamW(const OptimizerConfig& config, std::vector<ParameterSegment> segments)
    : config_(config), segments_(std::move(segments)) {
  for (const ParameterSegment& s : segments_) {
    m_.push_back(Tensor::zeros({s.numel()}, DType::F32, s.param->value.device()));
    v_.push_back(Tensor::zeros({s.numel()}, DType::F32, s.param->value.device()));
  }
}

void AdamW::step(float lr, float grad_scale, std::int64_t step) {
  AdamWHyper h;
  h.lr = lr;
  h.beta1 = static_cast<float>(config_.beta1);
  h.beta2 = static_cast<float>(config_.beta2);
  h.eps = static_cast<float>(config_.eps);
  h.grad_scale = grad_scale;
  h.step = step;
  // Every segment in one call (one launch on CUDA), each with its own weight decay.
  std::vector<AdamWTensors> tensors;
  tensors.reserve(segments_.size());
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const ParameterSegment& s = segments_[i];
    const float weight_decay = s.param->weight_decay ? static_cast<float>(config_.weight_decay)
                                                     : 0.0f;
    tensors.push_back({s.value(), s.grad(), m_[i], v_[i], weight_decay});
  }
  adamw_update_many(tensors, h);
}

std::size_t AdamW::state_bytes() const {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < m_.size(); ++i) bytes += m_[i].nbytes() + v_[i].nbytes();
  return bytes;
}

}  // namespace ternion
