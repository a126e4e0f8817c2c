#include "layers/transformer_block.h"

#include "layers/model_family.h"

namespace ternion {

TransformerBlock::TransformerBlock(std::string name, const ModelConfig& config,
                                   const TensorParallel& tp)
    : TransformerBlock(name, model_family(config.family).block_parts(name, config, tp)) {}

TransformerBlock::TransformerBlock(std::string name, TransformerBlockParts parts)
    : Layer(std::move(name)), parts_(std::move(parts)) {}

Tensor TransformerBlock::forward(const Tensor& input, ActivationContext& ctx) {
  // Each branch adds its output to the residual stream itself (its output projection's GEMM
  // does where it can: layers/residual_branch.h).
  const Tensor residual =
      parts_.attention->forward_residual(parts_.norm_1->forward(input, ctx), input, ctx);
  return parts_.mlp->forward_residual(parts_.norm_2->forward(residual, ctx), residual, ctx);
}

Tensor TransformerBlock::backward(const Tensor& grad_output, ActivationContext& ctx) {
  // The residual stream's gradient passes straight through each branch and adds to the
  // branch's, which the norm adds as it writes its input's gradient.
  Tensor dresidual =
      parts_.norm_2->backward(parts_.mlp->backward(grad_output, ctx), ctx, grad_output);
  return parts_.norm_1->backward(parts_.attention->backward(dresidual, ctx), ctx, dresidual);
}

void TransformerBlock::collect_parameters(std::vector<Parameter*>& out) {
  parts_.norm_1->collect_parameters(out);
  parts_.attention->collect_parameters(out);
  parts_.norm_2->collect_parameters(out);
  parts_.mlp->collect_parameters(out);
}

double TransformerBlock::forward_flops_per_token(std::int64_t seq_len) {
  return parts_.norm_1->forward_flops_per_token(seq_len) +
         parts_.attention->forward_flops_per_token(seq_len) +
         parts_.norm_2->forward_flops_per_token(seq_len) +
         parts_.mlp->forward_flops_per_token(seq_len);
}

}  // namespace ternion
