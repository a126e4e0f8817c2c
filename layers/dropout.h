// Dropout on [batch, seq, C] activations, with masks keyed by (seed, step, this layer's name,
// global element index): see kernels/dropout.h. Identity when p = 0 or not training.
#pragma once

#include "layers/layer.h"

namespace ternion {

class Dropout : public Layer {
 public:
  Dropout(std::string name, float p) : Layer(std::move(name)), p_(p) {}
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;

 private:
  struct Saved : SavedActivations {
    bool applied = false;
  };
  float p_;
};

}  // namespace ternion
