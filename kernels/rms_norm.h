// RMSNorm over the last dimension of x [..., C] (rows = numel / C), with weight [C] and no bias:
// Hugging Face's LlamaRMSNorm, computed in F32 and rounded once to x's dtype.
//   forward   rstd = 1 / sqrt(mean_c(x^2) + eps)  [rows] F32;  out = x * rstd * weight
//   backward  dx = rstd * (dnorm - xhat * mean_c(dnorm * xhat)),  xhat = x * rstd,
//             dnorm = dout * weight                                   (dx overwritten)
//             dweight[c] += sum over rows of dout * xhat                (accumulates, F32)
//             With `residual` (the gradient that reaches x along a residual stream, x's shape
//             and dtype, not dx's memory), dx is the RMSNorm's dx plus residual, rounded as
//             the two ops would round it: bit for bit rms_norm_backward followed by
//             accumulate(dx, *residual), in one pass on a GPU instead of two.
// x, out, dout, dx and weight one dtype, F32 or BF16; rstd and dweight F32; all contiguous on
// x's device. out may alias x and dx may alias dout: each element is read before it is written.
#pragma once

#include "framework/tensor.h"

namespace ternion {

void rms_norm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& weight, float eps);
void rms_norm_backward(Tensor& dx, Tensor& dweight, const Tensor& dout, const Tensor& x,
                       const Tensor& weight, const Tensor& rstd, const Tensor* residual = nullptr);

}  // namespace ternion
