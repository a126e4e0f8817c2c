// GELU, GPT-2's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
//   forward   out = gelu(x)                 (any shape, contiguous; out may alias x)
//   backward  dx  = gelu'(x) * dout         (overwrites dx; dx may alias dout)
//             with dbias (F32 [C], for x [N, C] the output of a linear layer with that bias):
//             also dbias += column sums of dx, bit for bit bias_add_backward(dbias, dx) after
//             the backward, and on a GPU in the same pass over memory
#pragma once

#include "framework/tensor.h"

namespace ternion {

void gelu_forward(Tensor& out, const Tensor& x);
void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dout, Tensor* dbias = nullptr);

}  // namespace ternion
