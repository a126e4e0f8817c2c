// GELU, GPT-2's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
//   forward   out = gelu(x)                 (any shape, contiguous; out may alias x)
//   backward  dx  = gelu'(x) * dout         (overwrites dx; dx may alias dout)
#pragma once

#include "framework/tensor.h"

namespace ternion {

void gelu_forward(Tensor& out, const Tensor& x);
void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dout);

}  // namespace ternion
