// Bias add over the last dimension.
//   forward   out[n, c] += bias[c]            (in place on out [N, C])
//   backward  dbias[c]  += sum_n dout[n, c]   (accumulates)
#pragma once

#include "framework/tensor.h"

namespace ternion {

void bias_add_forward(Tensor& out, const Tensor& bias);
void bias_add_backward(Tensor& dbias, const Tensor& dout);

}  // namespace ternion
