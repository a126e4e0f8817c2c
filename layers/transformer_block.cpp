#include "layers/transformer_block.h"

namespace ternion {

TransformerBlock::TransformerBlock(std::string name, const ModelConfig& config,
                                   const TensorParallel& tp)
    : Layer(std::move(name)),
      ln_1_(this->name() + ".ln_1", config.d_model, tp),
      attn_(this->name() + ".attn", config, tp),
      ln_2_(this->name() + ".ln_2", config.d_model, tp),
      mlp_(this->name() + ".mlp", config, tp) {}

Tensor TransformerBlock::forward(const Tensor& input, ActivationContext& ctx) {
  // Each branch adds its output to the residual stream itself (its output projection's GEMM
  // does where it can: layers/residual_branch.h).
  const Tensor residual = attn_.forward_residual(ln_1_.forward(input, ctx), input, ctx);
  return mlp_.forward_residual(ln_2_.forward(residual, ctx), residual, ctx);
}

Tensor TransformerBlock::backward(const Tensor& grad_output, ActivationContext& ctx) {
  // The residual stream's gradient passes straight through each branch and adds to the
  // branch's, which the LayerNorm adds as it writes its input's gradient.
  Tensor dresidual = ln_2_.backward(mlp_.backward(grad_output, ctx), ctx, grad_output);
  return ln_1_.backward(attn_.backward(dresidual, ctx), ctx, dresidual);
}

void TransformerBlock::collect_parameters(std::vector<Parameter*>& out) {
  ln_1_.collect_parameters(out);
  attn_.collect_parameters(out);
  ln_2_.collect_parameters(out);
  mlp_.collect_parameters(out);
}

}  // namespace ternion
