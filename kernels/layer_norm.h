// LayerNorm over the last dimension of x [N, C], with weight and bias [C].
//   forward   out = (x - mean) * rstd * weight + bias; saves mean [N] and rstd [N]
//   backward  dx overwritten; dweight and dbias accumulate. With `residual` (the gradient that
//             reaches x along a residual stream, [N, C] in x's dtype, not dx's memory), dx is
//             the LayerNorm's dx plus residual, rounded as the two ops would round it: bit for
//             bit layer_norm_backward followed by accumulate(dx, *residual), in one pass on a
//             GPU instead of two.
#pragma once

#include "framework/tensor.h"

namespace ternion {

inline constexpr float kLayerNormEps = 1e-5f;

void layer_norm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, float eps = kLayerNormEps);
void layer_norm_backward(Tensor& dx, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                         const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor* residual = nullptr);

}  // namespace ternion
