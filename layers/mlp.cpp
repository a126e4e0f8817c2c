#include "layers/mlp.h"

#include <cmath>

#include "kernels/gelu.h"

namespace ternion {

Mlp::Mlp(std::string name, const ModelConfig& config, const TensorParallel& tp)
    : Layer(std::move(name)),
      fc_(this->name() + ".fc", config.d_model, config.ff_width(), true,
          static_cast<float>(config.init_std), tp),
      proj_(this->name() + ".proj", config.ff_width(), config.d_model, true,
            static_cast<float>(config.init_std / std::sqrt(2.0 * config.n_layer)), tp),
      dropout_(this->name() + ".dropout", static_cast<float>(config.dropout), tp) {}

Tensor Mlp::forward(const Tensor& input, ActivationContext& ctx) {
  Tensor hidden = fc_.forward(input, ctx);
  Tensor activated = Tensor::empty(hidden.shape(), hidden.dtype(), hidden.device());
  gelu_forward(activated, hidden);
  ctx.save<Saved>(this).pre_gelu = hidden;
  return dropout_.forward(proj_.forward(activated, ctx), ctx);
}

Tensor Mlp::backward(const Tensor& grad_output, ActivationContext& ctx) {
  Tensor dactivated = proj_.backward(dropout_.backward(grad_output, ctx), ctx);
  const Saved saved = ctx.take<Saved>(this);
  gelu_backward(dactivated, saved.pre_gelu, dactivated);  // in place: dactivated is ours
  return fc_.backward(dactivated, ctx);
}

void Mlp::collect_parameters(std::vector<Parameter*>& out) {
  fc_.collect_parameters(out);
  proj_.collect_parameters(out);
}

}  // namespace ternion
