// MLP: up projection [C -> d_ff], GELU (tanh form), down projection [d_ff -> C], dropout.
#pragma once

#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/model_config.h"

namespace ternion {

class Mlp : public Layer {
 public:
  Mlp(std::string name, const ModelConfig& config);
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

 private:
  struct Saved : SavedActivations {
    Tensor pre_gelu;  // [B, T, d_ff]
  };
  Linear fc_;
  Linear proj_;
  Dropout dropout_;
};

}  // namespace ternion
