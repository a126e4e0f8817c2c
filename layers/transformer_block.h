// The GPT-2 block, pre-LayerNorm:
//   x = x + attn(ln_1(x))
//   x = x + mlp(ln_2(x))
// Registered as block type "transformer". Tensor parallel through its attention and MLP; under
// sequence parallelism the residual stream and both LayerNorms hold [batch, seq / tp, C].
#pragma once

#include "layers/attention.h"
#include "layers/layer_norm.h"
#include "layers/mlp.h"

namespace ternion {

class TransformerBlock : public Layer {
 public:
  TransformerBlock(std::string name, const ModelConfig& config, const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

 private:
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  Mlp mlp_;
};

}  // namespace ternion
