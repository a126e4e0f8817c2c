// A user-defined block: GPT-J / PaLM's "parallel" formulation, where attention and the MLP
// read the same normalised input and their outputs are added to the residual together:
//   x = x + attn(ln(x)) + mlp(ln(x))
// It is built only from Ternion's public layers and kernels, and selected from YAML with
// `model.block: parallel` once registered (see main.cpp). Passing spec.tp on to the layers
// makes it tensor-parallel too.
#pragma once

#include "kernels/elementwise.h"
#include "layers/attention.h"
#include "layers/layer_norm.h"
#include "layers/layer_registry.h"
#include "layers/mlp.h"

namespace example {

class ParallelBlock : public ternion::Layer {
 public:
  explicit ParallelBlock(const ternion::BlockSpec& spec)
      : Layer(spec.name),
        ln_(spec.name + ".ln", spec.config.d_model, spec.tp),
        attn_(spec.name + ".attn", spec.config, spec.tp),
        mlp_(spec.name + ".mlp", spec.config, spec.tp) {}

  ternion::Tensor forward(const ternion::Tensor& input, ternion::ActivationContext& ctx) override {
    ternion::Tensor normed = ln_.forward(input, ctx);
    ternion::Tensor out = attn_.forward(normed, ctx);
    ternion::Tensor mlp_out = mlp_.forward(normed, ctx);
    // The residual stream's dtype, not F32: under training.precision: bf16 it is bf16.
    ternion::Tensor sum = ternion::Tensor::empty(input.shape(), input.dtype(), input.device());
    ternion::add(sum, out, mlp_out);
    ternion::add(sum, sum, input);
    return sum;
  }

  ternion::Tensor backward(const ternion::Tensor& grad_output, ternion::ActivationContext& ctx) override {
    // Backward in the reverse order of forward; both branches feed the one LayerNorm.
    ternion::Tensor dnormed = mlp_.backward(grad_output, ctx);
    ternion::accumulate(dnormed, attn_.backward(grad_output, ctx));
    ternion::Tensor dinput = ln_.backward(dnormed, ctx);
    ternion::accumulate(dinput, grad_output);
    return dinput;
  }

  void collect_parameters(std::vector<ternion::Parameter*>& out) override {
    ln_.collect_parameters(out);
    attn_.collect_parameters(out);
    mlp_.collect_parameters(out);
  }

  // The children's own counts (attention's includes its work over the keys): what the
  // trainer's FLOPs per token and MFU are quoted against.
  double forward_flops_per_token(std::int64_t seq_len) override {
    return ln_.forward_flops_per_token(seq_len) + attn_.forward_flops_per_token(seq_len) +
           mlp_.forward_flops_per_token(seq_len);
  }

 private:
  ternion::LayerNorm ln_;
  ternion::CausalSelfAttention attn_;
  ternion::Mlp mlp_;
};

inline void register_parallel_block() {
  ternion::LayerRegistry::instance().add("parallel", [](const ternion::BlockSpec& spec) {
    return std::make_unique<ParallelBlock>(spec);
  });
}

}  // namespace example
