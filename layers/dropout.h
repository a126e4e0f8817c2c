// Dropout on [batch, seq, C] activations, with masks keyed by (seed, step, this layer's name,
// global element index): see kernels/dropout.h. Identity when p = 0 or not training. Under
// sequence parallelism the input is this tensor-parallel rank's share of the sequence, and the
// mask is that share of the whole sequence's mask.
#pragma once

#include "kernels/dropout.h"
#include "layers/layer.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

class Dropout : public Layer {
 public:
  Dropout(std::string name, float p, const TensorParallel& tp = {})
      : Layer(std::move(name)), p_(p), tp_(tp) {}
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  // Whether forward changes its input in this micro-batch (p > 0 and training); where it does
  // not, a layer may fuse what comes after the dropout into what comes before it.
  bool active(const ActivationContext& ctx) const { return p_ > 0.0f && ctx.info().training; }

 private:
  struct Saved : SavedActivations {
    bool applied = false;
  };
  GlobalPosition position_of(const Tensor& x, const MicroBatchInfo& info) const;
  float p_;
  TensorParallel tp_;
};

}  // namespace ternion
