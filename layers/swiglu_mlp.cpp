#include "layers/swiglu_mlp.h"

#include <cmath>

#include "kernels/swiglu.h"
#include "layers/residual_branch.h"

namespace ternion {

SwiGluMlp::SwiGluMlp(std::string name, const ModelConfig& config, const TensorParallel& tp)
    : ResidualBranch(std::move(name)),
      gate_up_(this->name() + ".gate_up", config.d_model, 2 * config.ff_width(), false,
               static_cast<float>(config.init_std), tp),
      down_(this->name() + ".down", config.ff_width(), config.d_model, false,
            static_cast<float>(config.init_std / std::sqrt(2.0 * config.n_layer)), tp),
      dropout_(this->name() + ".dropout", static_cast<float>(config.dropout), tp) {}

Tensor SwiGluMlp::activated(const Tensor& input, ActivationContext& ctx) {
  const Tensor gate_up = gate_up_.forward(input, ctx);
  Shape shape = gate_up.shape();
  shape.back() /= 2;
  Tensor out = Tensor::empty(shape, gate_up.dtype(), input.device());
  swiglu_forward(out, gate_up);
  ctx.save<Saved>(this).gate_up = gate_up;
  // Half the width of gate_up, which the backward keeps anyway (selective recomputation).
  ctx.offer_recompute(out, [gate_up, shape] {
    Tensor again = Tensor::empty(shape, gate_up.dtype(), gate_up.device());
    swiglu_forward(again, gate_up);
    return again;
  });
  return out;
}

Tensor SwiGluMlp::forward(const Tensor& input, ActivationContext& ctx) {
  return project_onto_residual(down_, dropout_, activated(input, ctx), nullptr, ctx);
}

Tensor SwiGluMlp::forward_residual(const Tensor& input, const Tensor& residual,
                                   ActivationContext& ctx) {
  return project_onto_residual(down_, dropout_, activated(input, ctx), &residual, ctx);
}

Tensor SwiGluMlp::backward(const Tensor& grad_output, ActivationContext& ctx) {
  const Tensor dactivated = down_.backward(dropout_.backward(grad_output, ctx), ctx);
  const Saved saved = ctx.take<Saved>(this);
  Tensor dgate_up = Tensor::empty(saved.gate_up.shape(), dactivated.dtype(), grad_output.device());
  swiglu_backward(dgate_up, dactivated, saved.gate_up);
  return gate_up_.backward(dgate_up, ctx);
}

void SwiGluMlp::collect_parameters(std::vector<Parameter*>& out) {
  gate_up_.collect_parameters(out);
  down_.collect_parameters(out);
}

}  // namespace ternion
