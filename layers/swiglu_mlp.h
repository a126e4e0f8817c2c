// SwiGLU MLP (Llama's), no biases: gate and up projections [C -> d_ff] side by side in one
// GEMM, silu(gate) * up, down projection [d_ff -> C], dropout.   [B, T, C] -> [B, T, C]
//
// The gate_up projection's rows interleave the two (row 2j is feature j's gate, 2j + 1 its up:
// kernels/swiglu.h), so a tensor-parallel rank's contiguous share of it, column-parallel,
// holds whole pairs, d_ff / tp features, whatever the layout. The down projection is
// row-parallel: one all-reduce forward, one backward (in gate_up's input gradient).
#pragma once

#include "layers/block_parts.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/model_config.h"

namespace ternion {

class SwiGluMlp : public ResidualBranch {
 public:
  SwiGluMlp(std::string name, const ModelConfig& config, const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor forward_residual(const Tensor& input, const Tensor& residual,
                          ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

 private:
  struct Saved : SavedActivations {
    Tensor gate_up;  // [B, T, 2 d_ff / tp]
  };
  Tensor activated(const Tensor& input, ActivationContext& ctx);
  ColumnParallelLinear gate_up_;
  RowParallelLinear down_;
  Dropout dropout_;
};

}  // namespace ternion
