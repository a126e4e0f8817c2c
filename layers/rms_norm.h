// RMSNorm over the last dimension, with a learned weight (init 1, not weight-decayed) and no
// bias (Llama's):  out = x / sqrt(mean(x^2) + eps) * weight  (kernels/rms_norm.h).
// Under sequence parallelism each tensor-parallel rank normalises its own share of the
// tokens, so its weight gradient is a partial sum over the group.
#pragma once

#include "layers/block_parts.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

class RmsNorm : public Norm {
 public:
  RmsNorm(std::string name, std::int64_t features, float eps, const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx,
                  const Tensor& residual_grad) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

 private:
  Tensor backward_rows(const Tensor& grad_output, ActivationContext& ctx,
                       const Tensor* residual_rows);
  struct Saved : SavedActivations {
    Tensor input, rstd;  // [rows, C], [rows]
  };
  std::int64_t features_;
  float eps_;
  Parameter weight_;
};

}  // namespace ternion
