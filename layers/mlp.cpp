#include "layers/mlp.h"

#include <cmath>

#include "layers/residual_branch.h"

namespace ternion {

Mlp::Mlp(std::string name, const ModelConfig& config, const TensorParallel& tp)
    : ResidualBranch(std::move(name)),
      fc_(this->name() + ".fc", config.d_model, config.ff_width(), true,
          static_cast<float>(config.init_std), tp, LinearActivation::gelu),
      proj_(this->name() + ".proj", config.ff_width(), config.d_model, true,
            static_cast<float>(config.init_std / std::sqrt(2.0 * config.n_layer)), tp),
      dropout_(this->name() + ".dropout", static_cast<float>(config.dropout), tp) {}

Tensor Mlp::forward(const Tensor& input, ActivationContext& ctx) {
  const Tensor activated = fc_.forward(input, ctx);  // gelu(x W_fc^T + b_fc), [B, T, d_ff / tp]
  return project_onto_residual(proj_, dropout_, activated, nullptr, ctx);
}

Tensor Mlp::forward_residual(const Tensor& input, const Tensor& residual,
                             ActivationContext& ctx) {
  const Tensor activated = fc_.forward(input, ctx);
  return project_onto_residual(proj_, dropout_, activated, &residual, ctx);
}

Tensor Mlp::backward(const Tensor& grad_output, ActivationContext& ctx) {
  // The down projection's input gradient goes on through the up projection's GELU in the same
  // op (one GEMM with cuBLASLt's DGELU epilogue on CUDA in bf16); the up projection continues
  // from its pre-activation's gradient.
  const Tensor dproj = dropout_.backward(grad_output, ctx);
  const Tensor dpre = proj_.backward(dproj, ctx, fc_.output_gelu(ctx));
  return fc_.backward_pre_activation(dpre, ctx);
}

void Mlp::collect_parameters(std::vector<Parameter*>& out) {
  fc_.collect_parameters(out);
  proj_.collect_parameters(out);
}

}  // namespace ternion
