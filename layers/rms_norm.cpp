#include "layers/rms_norm.h"

#include "kernels/elementwise.h"
#include "kernels/rms_norm.h"

namespace ternion {

RmsNorm::RmsNorm(std::string name, std::int64_t features, float eps, const TensorParallel& tp)
    : Norm(std::move(name)),
      features_(features),
      eps_(eps),
      weight_(make_parameter(this->name() + ".weight", {features}, ParameterInit::Ones, 0.0f,
                             /*weight_decay=*/false)) {
  weight_.tensor_parallel_partial_grad = tp.sequence_parallel && tp.active();
}

Tensor RmsNorm::forward(const Tensor& input, ActivationContext& ctx) {
  const Tensor x = input.view({-1, features_});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), input.device());
  Saved& saved = ctx.save<Saved>(this);
  saved.input = x;
  saved.rstd = Tensor::empty({x.size(0)}, DType::F32, input.device());
  rms_norm_forward(out, saved.rstd, x, weight_.compute_value(), eps_);
  // The output is one pass over the input it saves anyway (selective recomputation).
  ctx.offer_recompute(out, [x, w = weight_.compute_value(), eps = eps_] {
    Tensor again = Tensor::empty(x.shape(), x.dtype(), x.device());
    Tensor rstd = Tensor::empty({x.size(0)}, DType::F32, x.device());
    rms_norm_forward(again, rstd, x, w, eps);
    return again;
  });
  return out.view(input.shape());
}

Tensor RmsNorm::backward(const Tensor& grad_output, ActivationContext& ctx) {
  return backward_rows(grad_output, ctx, nullptr);
}

Tensor RmsNorm::backward(const Tensor& grad_output, ActivationContext& ctx,
                         const Tensor& residual_grad) {
  const Tensor residual_rows = residual_grad.view({-1, features_});
  return backward_rows(grad_output, ctx, &residual_rows);
}

Tensor RmsNorm::backward_rows(const Tensor& grad_output, ActivationContext& ctx,
                              const Tensor* residual_rows) {
  const Saved saved = ctx.take<Saved>(this);
  const Tensor dy = grad_output.view({-1, features_});
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
  if (!ctx.defers_weight_gradients()) {
    rms_norm_backward(dx, weight_.grad, dy, saved.input, weight_.compute_value(), saved.rstd,
                      residual_rows);
    return dx.view(grad_output.shape());
  }
  // As LayerNorm's: the weight's gradient to a fresh sum, added when W runs.
  Tensor dweight = Tensor::zeros(weight_.value.shape(), weight_.value.dtype(), dx.device());
  rms_norm_backward(dx, dweight, dy, saved.input, weight_.compute_value(), saved.rstd,
                    residual_rows);
  ctx.weight_gradients([this, dweight] { accumulate(weight_.grad, dweight); });
  return dx.view(grad_output.shape());
}

void RmsNorm::collect_parameters(std::vector<Parameter*>& out) { out.push_back(&weight_); }

}  // namespace ternion
