// SwiGLU, Llama's MLP activation, on the output of the fused gate and up projection.
//   gate_up [..., 2F]  feature j's gate at column 2j, its up at 2j + 1: interleaved, so that a
//                      tensor-parallel rank's contiguous slice of the projection's output rows
//                      (column-parallel) holds whole (gate, up) pairs
//   out     [..., F]
//   forward   out[..., j] = silu(g_j) u_j,  silu(g) = g / (1 + exp(-g))        (overwrites out)
//   backward  dgate_up[..., 2j]     = dout_j u_j silu'(g_j)
//             dgate_up[..., 2j + 1] = dout_j silu(g_j)                   (overwrites dgate_up)
//             silu'(g) = s (1 + g (1 - s)), s = sigmoid(g)
// Every tensor one dtype, F32 or BF16 (math in F32, kernels/swiglu_math.h), contiguous, on one
// device. out may not alias gate_up; dgate_up may alias gate_up (each pair is read before it is
// written), not dout.
#pragma once

#include "framework/tensor.h"

namespace ternion {

void swiglu_forward(Tensor& out, const Tensor& gate_up);
void swiglu_backward(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up);

}  // namespace ternion
