// LayerNorm over the last dimension of x [N, C], with weight and bias [C].
//   forward   out = (x - mean) * rstd * weight + bias; saves mean [N] and rstd [N]
//   backward  dx overwritten; dweight and dbias accumulate
#pragma once

#include "framework/tensor.h"

namespace ternion {

inline constexpr float kLayerNormEps = 1e-5f;

void layer_norm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, float eps = kLayerNormEps);
void layer_norm_backward(Tensor& dx, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                         const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd);

}  // namespace ternion
