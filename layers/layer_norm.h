// LayerNorm over the last dimension, with learned weight (init 1) and bias (init 0); neither
// is weight-decayed. Under sequence parallelism each tensor-parallel rank normalises its own
// share of the tokens, so its weight and bias gradients are partial sums over the group.
#pragma once

#include "layers/layer.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, std::int64_t features, const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  // The input's gradient plus `residual_grad`, the gradient reaching the same input along a
  // residual stream (input's shape and dtype): what backward + accumulate give, in one pass on
  // a GPU.
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx, const Tensor& residual_grad);
  void collect_parameters(std::vector<Parameter*>& out) override;

 private:
  Tensor backward_rows(const Tensor& grad_output, ActivationContext& ctx,
                       const Tensor* residual_rows);
  struct Saved : SavedActivations {
    Tensor input, mean, rstd;  // [rows, C], [rows], [rows]
  };
  std::int64_t features_;
  Parameter weight_;
  Parameter bias_;
};

}  // namespace ternion
