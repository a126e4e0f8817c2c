// SGD with momentum (PyTorch's form: weight decay added to the gradient, only on parameters
// flagged weight_decay).
#pragma once

#include "optimizers/optimizer.h"

namespace ternion {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& config, std::vector<ParameterSegment> segments);
  void step(float lr, float grad_scale, std::int64_t step) override;
  std::size_t state_bytes() const override;
  std::vector<std::string> state_kinds() const override { return {"momentum"}; }
  std::vector<Tensor> state_of(std::size_t segment) const override { return {momentum_[segment]}; }

 private:
  OptimizerConfig config_;
  std::vector<ParameterSegment> segments_;
  std::vector<Tensor> momentum_;
};

}  // namespace ternion
