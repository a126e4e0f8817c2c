// AdamW with decoupled weight decay (applied only to parameters flagged weight_decay:
// matrices and embeddings, never biases or LayerNorm). Moments are fp32, one pair per
// segment, allocated at construction.
#pragma once

#include "optimizers/optimizer.h"

namespace ternion {

class AdamW final : public Optimizer {
 public:
  AdamW(const OptimizerConfig& config, std::vector<ParameterSegment> segments);
  void step(float lr, float grad_scale, std::int64_t step) override;
  std::size_t state_bytes() const override;
  std::vector<std::string> state_kinds() const override { return {"m", "v"}; }
  std::vector<Tensor> state_of(std::size_t segment) const override {
    return {m_[segment], v_[segment]};
  }

 private:
  OptimizerConfig config_;
  std::vector<ParameterSegment> segments_;
  std::vector<Tensor> m_, v_;
};

}  // namespace ternion
