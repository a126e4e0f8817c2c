#include "layers/transformer_block.h"

#include "kernels/elementwise.h"

namespace ternion {

TransformerBlock::TransformerBlock(std::string name, const ModelConfig& config,
                                   const TensorParallel& tp)
    : Layer(std::move(name)),
      ln_1_(this->name() + ".ln_1", config.d_model, tp),
      attn_(this->name() + ".attn", config, tp),
      ln_2_(this->name() + ".ln_2", config.d_model, tp),
      mlp_(this->name() + ".mlp", config, tp) {}

Tensor TransformerBlock::forward(const Tensor& input, ActivationContext& ctx) {
  Tensor attn_out = attn_.forward(ln_1_.forward(input, ctx), ctx);
  Tensor residual = Tensor::empty(input.shape(), input.dtype(), input.device());
  add(residual, input, attn_out);
  Tensor mlp_out = mlp_.forward(ln_2_.forward(residual, ctx), ctx);
  add(mlp_out, residual, mlp_out);  // in place: mlp_out is ours
  return mlp_out;
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
