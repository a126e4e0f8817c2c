#include "layers/linear.h"

#include "kernels/bias_add.h"
#include "kernels/matmul.h"

namespace ternion {

Linear::Linear(std::string name, std::int64_t in_features, std::int64_t out_features, bool bias,
               float init_std)
    : Layer(std::move(name)),
      in_features_(in_features),
      out_features_(out_features),
      weight_(make_parameter(this->name() + ".weight", {out_features, in_features},
                             ParameterInit::Normal, init_std, /*weight_decay=*/true)),
      has_bias_(bias) {
  if (has_bias_)
    bias_ = make_parameter(this->name() + ".bias", {out_features}, ParameterInit::Zeros, 0.0f,
                           /*weight_decay=*/false);
}

namespace {
Shape with_last(const Shape& shape, std::int64_t last) {
  Shape out = shape;
  out.back() = last;
  return out;
}
}  // namespace

Tensor Linear::forward(const Tensor& input, ActivationContext& ctx) {
  TN_CHECK(input.size(-1) == in_features_, name(), ": input ", input.str(), ", expected ",
           in_features_, " features");
  const Tensor x = input.view({-1, in_features_});
  Tensor y = Tensor::empty({x.size(0), out_features_}, DType::F32, input.device());
  matmul(y, x, weight_.value, false, true);
  if (has_bias_) bias_add_forward(y, bias_.value);
  ctx.save<Saved>(this).input = x;
  return y.view(with_last(input.shape(), out_features_));
}

Tensor Linear::backward(const Tensor& grad_output, ActivationContext& ctx) {
  const Saved saved = ctx.take<Saved>(this);
  const Tensor dy = grad_output.view({-1, out_features_});
  matmul(weight_.grad, dy, saved.input, true, false, 1.0f, 1.0f);
  if (has_bias_) bias_add_backward(bias_.grad, dy);
  Tensor dx = Tensor::empty({dy.size(0), in_features_}, DType::F32, dy.device());
  matmul(dx, dy, weight_.value, false, false);
  return dx.view(with_last(grad_output.shape(), in_features_));
}

void Linear::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight_);
  if (has_bias_) out.push_back(&bias_);
}

}  // namespace ternion
