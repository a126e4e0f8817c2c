// Matrix multiply: out = alpha * op(a) @ op(b) + beta * out, op = optional transpose.
//
// All three are contiguous 2-D row-major tensors: op(a) is [M, K], op(b) is [K, N], out is
// [M, N]. Linear layers use the PyTorch weight layout W[out_features, in_features]:
//   forward   y  = x @ W^T        matmul(y, x, W, false, true)
//   backward  dx = dy @ W         matmul(dx, dy, W, false, false)            (overwrite)
//             dW += dy^T @ x      matmul(dW, dy, x, true, false, 1, 1)       (accumulate)
// CPU: OpenBLAS sgemm. CUDA: cuBLASLt.
#pragma once

#include "framework/tensor.h"

namespace ternion {

void matmul(Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
            float alpha = 1.0f, float beta = 0.0f);

}  // namespace ternion
