// LayerNorm over the last dimension, with learned weight (init 1) and bias (init 0); neither
// is weight-decayed. Under sequence parallelism each tensor-parallel rank normalises its own
// share of the tokens, so its weight and bias gradients are partial sums over the group.
#pragma once

#include "layers/block_parts.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

class LayerNorm : public Norm {
 public:
  LayerNorm(std::string name, std::int64_t features, const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx,
                  const Tensor& residual_grad) override;
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
