// The parts a pre-norm transformer block is built from (layers/transformer_block.h), as a
// model family builds them: two norms and two residual branches (attention, MLP).
#pragma once

#include "layers/layer.h"

namespace ternion {

// A normalisation over the last dimension (LayerNorm, RMSNorm).
class Norm : public Layer {
 public:
  using Layer::Layer;
  using Layer::backward;
  // The input's gradient plus `residual_grad`, the gradient reaching the same input along the
  // residual stream (input's shape and dtype): what backward + accumulate give, in one pass on
  // a GPU.
  virtual Tensor backward(const Tensor& grad_output, ActivationContext& ctx,
                          const Tensor& residual_grad) = 0;
};

// A branch that adds its output to the residual stream (attention, MLP).
class ResidualBranch : public Layer {
 public:
  using Layer::Layer;
  // residual + forward(input), the residual stream's next value (the backward is forward's:
  // the residual's gradient is the caller's). Where it can, the output projection's GEMM adds
  // the residual (layers/residual_branch.h).
  virtual Tensor forward_residual(const Tensor& input, const Tensor& residual,
                                  ActivationContext& ctx) = 0;
};

}  // namespace ternion
