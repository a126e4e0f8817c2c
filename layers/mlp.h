// MLP: up projection [C -> d_ff] with GELU (tanh form; the up projection's own activation, so
// on GPU bias and GELU follow the GEMM without a separate bias pass, and in bf16 GELU rides on
// the GEMM too where the run-time GELU check agrees), down projection [d_ff -> C], dropout. The
// backward takes the down projection's input gradient on through the GELU in one op
// (layers/linear.h). Tensor parallel: the up projection is column-parallel and the down projection
// row-parallel, so GELU runs on each rank's d_ff / tp columns and the block communicates once
// forward (the down projection's all-reduce) and once backward (the up projection's input
// gradient).
#pragma once

#include "layers/block_parts.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/model_config.h"

namespace ternion {

class Mlp : public ResidualBranch {
 public:
  Mlp(std::string name, const ModelConfig& config, const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor forward_residual(const Tensor& input, const Tensor& residual,
                          ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

 private:
  ColumnParallelLinear fc_;  // with GELU
  RowParallelLinear proj_;
  Dropout dropout_;
};

}  // namespace ternion
