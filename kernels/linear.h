// Linear layer forward in one op: out = act(x @ w^T + bias), w in PyTorch's layout [n, k].
//
//   x [rows, k], w [n, k], bias [n] (may be null: no bias), out [rows, n]: all contiguous, one
//   dtype (F32 or BF16), one device. out is overwritten.
//   LinearActivation::gelu (GPT-2's tanh form, kernels/gelu.h): pre_activation [rows, n], same
//   dtype, receives x @ w^T + bias (what gelu_backward needs) and out = gelu(pre_activation).
//   With LinearActivation::none, pre_activation must be null.
//
// CPU: matmul, bias_add_forward and gelu_forward in that order, bit for bit what calling them
// one by one gives. CUDA: the bias rides on the GEMM as cuBLASLt's bias epilogue (one pass over
// [rows, n] instead of two); where cuBLASLt offers no algorithm for it (or the bias pointer is
// not 16-byte aligned) the unfused kernels run instead, chosen at run time. GELU stays the
// separate gelu kernel: cuBLASLt does not document which GELU its GELU epilogues compute, so
// they cannot be trusted to be ours.
//
// The backward is the caller's (layers/linear.cpp): gelu_backward on pre_activation, then
//   dx = dy W, dW += dy^T x, db += sum_rows dy.
#pragma once

#include "framework/tensor.h"

namespace ternion {

enum class LinearActivation { none, gelu };

const char* linear_activation_name(LinearActivation activation);

void linear_forward(Tensor& out, Tensor* pre_activation, const Tensor& x, const Tensor& w,
                    const Tensor* bias, LinearActivation activation);

}  // namespace ternion
