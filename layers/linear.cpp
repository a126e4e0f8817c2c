#include "layers/linear.h"

#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/matmul.h"

namespace ternion {

namespace {
Shape with_last(const Shape& shape, std::int64_t last) {
  Shape out = shape;
  out.back() = last;
  return out;
}
}  // namespace

Linear::Linear(std::string name, std::int64_t in_features, std::int64_t out_features, bool bias,
               float init_std, WeightShard shard, LinearActivation activation)
    : Layer(std::move(name)),
      weight_(make_sharded_parameter(this->name() + ".weight", {out_features, in_features},
                                     shard.dim, shard.parts, shard.index, ParameterInit::Normal,
                                     init_std, /*weight_decay=*/true)),
      has_bias_(bias),
      activation_(activation) {
  if (has_bias_) {
    // The bias follows the output features: split with them, whole when the input is split.
    const std::int64_t parts = shard.dim == 0 ? shard.parts : 1;
    bias_ = make_sharded_parameter(this->name() + ".bias", {out_features}, 0, parts, shard.index,
                                   ParameterInit::Zeros, 0.0f, /*weight_decay=*/false);
  }
}

Tensor Linear::forward(const Tensor& input, ActivationContext& ctx) {
  return forward_impl(input, ctx, nullptr);
}

Tensor Linear::forward(const Tensor& input, ActivationContext& ctx, const Tensor& residual) {
  return forward_impl(input, ctx, &residual);
}

Tensor Linear::forward_impl(const Tensor& input, ActivationContext& ctx, const Tensor* residual) {
  TN_CHECK(input.size(-1) == in_features(), name(), ": input ", input.str(), ", expected ",
           in_features(), " features");
  const Tensor x = input.view({-1, in_features()});
  const Shape rows_shape{x.size(0), out_features()};
  Tensor y = Tensor::empty(rows_shape, x.dtype(), input.device());
  Tensor pre_activation;  // x W^T + b, for the activation's backward
  if (activation_ != LinearActivation::none)
    pre_activation = Tensor::empty(rows_shape, x.dtype(), input.device());
  Tensor residual_rows;
  if (residual != nullptr) {
    TN_CHECK(residual->shape() == with_last(input.shape(), out_features()), name(),
             ": residual ", residual->str(), " for input ", input.str());
    residual_rows = residual->view(rows_shape);
  }
  linear_forward(y, pre_activation.defined() ? &pre_activation : nullptr, x,
                 weight_.compute_value(), has_bias_ ? &bias_.compute_value() : nullptr,
                 activation_, residual != nullptr ? &residual_rows : nullptr);
  Saved& saved = ctx.save<Saved>(this);
  saved.input = ctx.keep(x);
  saved.pre_activation = pre_activation;
  // GELU's output is 4x the width of the block and one cheap pass over the saved
  // pre-activation away: the next layer may keep the recipe instead (selective recomputation).
  if (activation_ == LinearActivation::gelu)
    ctx.offer_recompute(y, [pre_activation] {
      Tensor out = Tensor::empty(pre_activation.shape(), pre_activation.dtype(),
                                 pre_activation.device());
      gelu_forward(out, pre_activation);
      return out;
    });
  return y.view(with_last(input.shape(), out_features()));
}

Tensor Linear::backward(const Tensor& grad_output, ActivationContext& ctx) {
  return backward_impl(grad_output, ctx, /*grad_is_pre_activation=*/false, OutputGelu{});
}

Tensor Linear::backward(const Tensor& grad_output, ActivationContext& ctx,
                        const OutputGelu& input_gelu) {
  TN_CHECK(input_gelu.pre_activation != nullptr, name(),
           ": backward through the input's GELU without its pre-activation");
  return backward_impl(grad_output, ctx, /*grad_is_pre_activation=*/false, input_gelu);
}

Tensor Linear::backward_pre_activation(const Tensor& grad_pre_activation, ActivationContext& ctx) {
  TN_CHECK(activation_ != LinearActivation::none, name(),
           ": backward_pre_activation on a layer without an activation");
  return backward_impl(grad_pre_activation, ctx, /*grad_is_pre_activation=*/true, OutputGelu{});
}

OutputGelu Linear::output_gelu(const ActivationContext& ctx) {
  TN_CHECK(activation_ == LinearActivation::gelu, name(), ": output_gelu on a layer without GELU");
  return OutputGelu{&ctx.peek<Saved>(this).pre_activation};
}

Tensor Linear::backward_impl(const Tensor& grad, ActivationContext& ctx,
                             bool grad_is_pre_activation, const OutputGelu& input_gelu) {
  Tensor dz = grad.view({-1, out_features()});  // the gradient of x W^T + b
  // The previous layer's pre-activation, checked before any gradient accumulates.
  Tensor input_pre;
  if (input_gelu.pre_activation != nullptr) {
    input_pre = input_gelu.pre_activation->view({-1, in_features()});
    TN_CHECK(input_pre.size(0) == dz.size(0) && input_pre.dtype() == dz.dtype(), name(),
             ": the input's pre-activation ", input_gelu.pre_activation->str(),
             " does not match the gradient ", grad.str());
  }
  const Saved saved = ctx.take<Saved>(this);
  if (activation_ == LinearActivation::gelu && !grad_is_pre_activation) {
    Tensor dpre = Tensor::empty(dz.shape(), dz.dtype(), dz.device());  // grad is the caller's
    gelu_backward(dpre, saved.pre_activation, dz);
    dz = dpre;
  }
  ctx.weight_gradients([this, dz, input = saved.input] {
    linear_backward_weights(weight_.grad, has_bias_ ? &bias_.grad : nullptr, dz, input.get());
  });
  Tensor dx = Tensor::empty({dz.size(0), in_features()}, dz.dtype(), dz.device());
  if (input_pre.defined()) {
    linear_backward_through_gelu(dx, dz, weight_.compute_value(), input_pre);
  } else {
    matmul(dx, dz, weight_.compute_value(), false, false);
  }
  return dx.view(with_last(grad.shape(), in_features()));
}

void Linear::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight_);
  if (has_bias_) out.push_back(&bias_);
}

ColumnParallelLinear::ColumnParallelLinear(std::string name, std::int64_t in_features,
                                           std::int64_t out_features, bool bias, float init_std,
                                           const TensorParallel& tp, LinearActivation activation)
    : Layer(name), tp_(tp),
      local_(std::move(name), in_features, out_features, bias, init_std,
             WeightShard{0, tp.size(), tp.rank()}, activation) {}

Tensor ColumnParallelLinear::forward(const Tensor& input, ActivationContext& ctx) {
  const Tensor x = tp_.sequence_parallel ? gather_from_sequence_region(input, tp_)
                                         : copy_to_tensor_region(input, tp_);
  return local_.forward(x, ctx);
}

namespace {
// The input gradient's communication: the reverse of the forward's gather or copy.
Tensor column_parallel_input_grad(Tensor dx, const TensorParallel& tp) {
  if (tp.sequence_parallel) return gather_from_sequence_region_backward(dx, tp);
  copy_to_tensor_region_backward(dx, tp);
  return dx;
}
}  // namespace

Tensor ColumnParallelLinear::backward(const Tensor& grad_output, ActivationContext& ctx) {
  return column_parallel_input_grad(local_.backward(grad_output, ctx), tp_);
}

Tensor ColumnParallelLinear::backward_pre_activation(const Tensor& grad_pre_activation,
                                                     ActivationContext& ctx) {
  return column_parallel_input_grad(local_.backward_pre_activation(grad_pre_activation, ctx), tp_);
}

RowParallelLinear::RowParallelLinear(std::string name, std::int64_t in_features,
                                     std::int64_t out_features, bool bias, float init_std,
                                     const TensorParallel& tp)
    : Layer(name), tp_(tp),
      // With one tensor rank there is no reduction to wait for, so the bias is the local
      // layer's (on CUDA, the GEMM's epilogue instead of another pass over the output).
      local_(name, in_features, out_features, /*bias=*/bias && !tp.active(), init_std,
             WeightShard{1, tp.size(), tp.rank()}),
      has_bias_(bias && tp.active()) {
  if (has_bias_)
    bias_ = make_parameter(name + ".bias", {out_features}, ParameterInit::Zeros, 0.0f,
                           /*weight_decay=*/false);
  // Under sequence parallelism each rank adds the bias to its own tokens only.
  if (has_bias_) bias_.tensor_parallel_partial_grad = tp.sequence_parallel && tp.active();
}

Tensor RowParallelLinear::forward(const Tensor& input, ActivationContext& ctx) {
  return forward_impl(input, ctx, nullptr);
}

Tensor RowParallelLinear::forward(const Tensor& input, ActivationContext& ctx,
                                  const Tensor& residual) {
  return forward_impl(input, ctx, &residual);
}

Tensor RowParallelLinear::forward_impl(const Tensor& input, ActivationContext& ctx,
                                       const Tensor* residual) {
  // With one tensor rank the local layer is the whole layer, bias included: its GEMM adds
  // the residual too.
  if (residual != nullptr && !tp_.active()) return local_.forward(input, ctx, *residual);
  if (residual != nullptr) {  // checked before anything is computed or communicated
    Shape output = with_last(input.shape(), local_.out_features());
    if (tp_.sequence_parallel && output.size() >= 2) output[1] /= tp_.size();
    TN_CHECK(residual->shape() == output, name(), ": residual ", residual->str(),
             " for an output of ", shape_str(output));
  }
  Tensor y = local_.forward(input, ctx);
  if (tp_.sequence_parallel) {
    y = reduce_scatter_to_sequence_region(y, tp_);
  } else {
    reduce_from_tensor_region(y, tp_);
  }
  if (has_bias_) {
    Tensor rows = y.view({-1, y.size(-1)});
    bias_add_forward(rows, bias_.compute_value());
  }
  if (residual != nullptr) accumulate(y, *residual);  // y is ours: the reduction's result
  return y;
}

Tensor RowParallelLinear::backward(const Tensor& grad_output, ActivationContext& ctx) {
  return backward(grad_output, ctx, OutputGelu{});
}

Tensor RowParallelLinear::backward(const Tensor& grad_output, ActivationContext& ctx,
                                   const OutputGelu& input_gelu) {
  if (has_bias_)
    ctx.weight_gradients([this, dy = grad_output.view({-1, grad_output.size(-1)})] {
      bias_add_backward(bias_.grad, dy);
    });
  const Tensor dy = tp_.sequence_parallel
                        ? reduce_scatter_to_sequence_region_backward(grad_output, tp_)
                        : reduce_from_tensor_region_backward(grad_output, tp_);
  return input_gelu.pre_activation != nullptr ? local_.backward(dy, ctx, input_gelu)
                                              : local_.backward(dy, ctx);
}

void RowParallelLinear::collect_parameters(std::vector<Parameter*>& out) {
  local_.collect_parameters(out);
  if (has_bias_) out.push_back(&bias_);
}

}  // namespace ternion
