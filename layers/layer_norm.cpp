#include "layers/layer_norm.h"

#include "kernels/elementwise.h"
#include "kernels/layer_norm.h"

namespace ternion {

LayerNorm::LayerNorm(std::string name, std::int64_t features, const TensorParallel& tp)
    : Norm(std::move(name)),
      features_(features),
      weight_(make_parameter(this->name() + ".weight", {features}, ParameterInit::Ones, 0.0f,
                             /*weight_decay=*/false)),
      bias_(make_parameter(this->name() + ".bias", {features}, ParameterInit::Zeros, 0.0f,
                           /*weight_decay=*/false)) {
  const bool partial = tp.sequence_parallel && tp.active();
  weight_.tensor_parallel_partial_grad = partial;
  bias_.tensor_parallel_partial_grad = partial;
}

Tensor LayerNorm::forward(const Tensor& input, ActivationContext& ctx) {
  const Tensor x = input.view({-1, features_});
  const Device device = input.device();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  Saved& saved = ctx.save<Saved>(this);
  saved.input = x;
  saved.mean = Tensor::empty({x.size(0)}, DType::F32, device);
  saved.rstd = Tensor::empty({x.size(0)}, DType::F32, device);
  layer_norm_forward(out, saved.mean, saved.rstd, x, weight_.compute_value(),
                     bias_.compute_value());
  // The output is one pass over the input it saves anyway (selective recomputation).
  ctx.offer_recompute(out, [x, w = weight_.compute_value(), b = bias_.compute_value()] {
    Tensor again = Tensor::empty(x.shape(), x.dtype(), x.device());
    Tensor mean = Tensor::empty({x.size(0)}, DType::F32, x.device());
    Tensor rstd = Tensor::empty({x.size(0)}, DType::F32, x.device());
    layer_norm_forward(again, mean, rstd, x, w, b);
    return again;
  });
  return out.view(input.shape());
}

Tensor LayerNorm::backward(const Tensor& grad_output, ActivationContext& ctx) {
  return backward_rows(grad_output, ctx, nullptr);
}

Tensor LayerNorm::backward(const Tensor& grad_output, ActivationContext& ctx,
                           const Tensor& residual_grad) {
  const Tensor residual_rows = residual_grad.view({-1, features_});
  return backward_rows(grad_output, ctx, &residual_rows);
}

Tensor LayerNorm::backward_rows(const Tensor& grad_output, ActivationContext& ctx,
                                const Tensor* residual_rows) {
  const Saved saved = ctx.take<Saved>(this);
  const Tensor dy = grad_output.view({-1, features_});
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
  if (!ctx.defers_weight_gradients()) {
    layer_norm_backward(dx, weight_.grad, bias_.grad, dy, saved.input, weight_.compute_value(),
                        saved.mean, saved.rstd, residual_rows);
    return dx.view(grad_output.shape());
  }
  // One pass gives both gradients: the parameters' go to fresh sums, added when W runs (the
  // kernel adds finished column sums to what is there, so 0 + sum, then +=, is the same).
  // Shaped as the master values: under ZeRO-2 the gradient has no memory before W.
  Tensor dweight = Tensor::zeros(weight_.value.shape(), weight_.value.dtype(), dx.device());
  Tensor dbias = Tensor::zeros(bias_.value.shape(), bias_.value.dtype(), dx.device());
  layer_norm_backward(dx, dweight, dbias, dy, saved.input, weight_.compute_value(), saved.mean,
                      saved.rstd, residual_rows);
  ctx.weight_gradients([this, dweight, dbias] {
    accumulate(weight_.grad, dweight);
    accumulate(bias_.grad, dbias);
  });
  return dx.view(grad_output.shape());
}

void LayerNorm::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight_);
  out.push_back(&bias_);
}

}  // namespace ternion
