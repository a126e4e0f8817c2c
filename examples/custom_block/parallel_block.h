// A user-defined block: GPT-J / PaLM's "parallel" formulation, where attention and the MLP
// read the same normalised input and their outputs are added to the residual together:
//   x = x + attn(norm(x)) + mlp(norm(x))
// Its parts are the model family's (model.family): GPT-2's LayerNorm, multi-head attention and
// GELU MLP, or Llama's RMSNorm, grouped-query attention with rotary positions and SwiGLU MLP,
// so it trains in either family with the positions that family encodes. It is built only from
// Ternion's public layers and kernels, and selected from YAML with `model.block: parallel` once
// registered (see main.cpp). Passing spec.tp on to the parts makes it tensor-parallel too.
#pragma once

#include "kernels/elementwise.h"
#include "layers/layer_registry.h"
#include "layers/model_family.h"

namespace example {

class ParallelBlock : public ternion::Layer {
 public:
  explicit ParallelBlock(const ternion::BlockSpec& spec)
      : Layer(spec.name),
        parts_(ternion::model_family(spec.config.family)
                   .block_parts(spec.name, spec.config, spec.tp)) {
    parts_.norm_2.reset();  // one norm feeds both branches
  }

  ternion::Tensor forward(const ternion::Tensor& input, ternion::ActivationContext& ctx) override {
    ternion::Tensor normed = parts_.norm_1->forward(input, ctx);
    ternion::Tensor out = parts_.attention->forward(normed, ctx);
    ternion::Tensor mlp_out = parts_.mlp->forward(normed, ctx);
    // The residual stream's dtype, not F32: under training.precision: bf16 it is bf16.
    ternion::Tensor sum = ternion::Tensor::empty(input.shape(), input.dtype(), input.device());
    ternion::add(sum, out, mlp_out);
    ternion::add(sum, sum, input);
    return sum;
  }

  ternion::Tensor backward(const ternion::Tensor& grad_output,
                           ternion::ActivationContext& ctx) override {
    // Backward in the reverse order of forward; both branches feed the one norm, whose input
    // also reaches the output along the residual stream.
    ternion::Tensor dnormed = parts_.mlp->backward(grad_output, ctx);
    ternion::accumulate(dnormed, parts_.attention->backward(grad_output, ctx));
    return parts_.norm_1->backward(dnormed, ctx, grad_output);
  }

  void collect_parameters(std::vector<ternion::Parameter*>& out) override {
    parts_.norm_1->collect_parameters(out);
    parts_.attention->collect_parameters(out);
    parts_.mlp->collect_parameters(out);
  }

  // The parts' own counts (attention's includes its work over the keys): what the trainer's
  // FLOPs per token and MFU are quoted against.
  double forward_flops_per_token(std::int64_t seq_len) override {
    return parts_.norm_1->forward_flops_per_token(seq_len) +
           parts_.attention->forward_flops_per_token(seq_len) +
           parts_.mlp->forward_flops_per_token(seq_len);
  }

 private:
  ternion::TransformerBlockParts parts_;
};

inline void register_parallel_block() {
  ternion::LayerRegistry::instance().add("parallel", [](const ternion::BlockSpec& spec) {
    return std::make_unique<ParallelBlock>(spec);
  });
}

}  // namespace example
