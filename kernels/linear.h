// Linear layer forward in one op: out = act(x @ w^T + bias) (+ residual), w in PyTorch's
// layout [n, k].
//
//   x [rows, k], w [n, k], bias [n] (may be null: no bias), out [rows, n]: all contiguous, one
//   dtype (F32 or BF16), one device. out is overwritten.
//   residual [rows, n] (may be null; only with LinearActivation::none; not out's memory): the
//   residual stream the output joins, out = x @ w^T + bias + residual. CPU: accumulate(out,
//   residual) after the bias, bit for bit add(sum, residual, out) after the layer. CUDA: the
//   GEMM adds it as its C matrix (one rounding instead of two, and no separate pass).
//   LinearActivation::gelu (GPT-2's tanh form, kernels/gelu.h): pre_activation [rows, n], same
//   dtype, receives x @ w^T + bias (what gelu_backward needs) and out = gelu(pre_activation).
//   With LinearActivation::none, pre_activation must be null.
//
// CPU: matmul, bias_add_forward and gelu_forward in that order, bit for bit what calling them
// one by one gives. CUDA: the bias rides on the GEMM as cuBLASLt's bias epilogue (one pass over
// [rows, n] instead of two); in BF16 with GELU, bias and GELU both do (GELU_AUX_BIAS: the GEMM
// writes pre_activation and out, and GELU is taken of the F32 sum before it is rounded). The
// GELU epilogue is used as gelu_epilogue() says: by default only where
// cuda::gelu_epilogues_agree(n, k), a run-time check per GEMM shape that cuBLASLt's GELU is
// ours (cuBLASLt does not document which GELU it computes).
// Where cuBLASLt offers no algorithm for an epilogue (or a pointer is not 16-byte aligned, or
// n is not a multiple of 8 for GELU) the unfused kernels run instead, chosen at run time.
//
// The backward is the caller's (layers/linear.cpp): gelu_backward on pre_activation, then
//   dx = dy W, and linear_backward_weights below: dW += dy^T x, db += sum_rows dy;
// where this layer's input is the previous layer's GELU output (the MLP), dx goes on through
// that GELU in the same op, linear_backward_through_gelu below.
#pragma once

#include <string_view>

#include "framework/tensor.h"

namespace ternion {

enum class LinearActivation { none, gelu };

const char* linear_activation_name(LinearActivation activation);

// Whether the CUDA linear ops may use cuBLASLt's GELU epilogues (bf16 only; a setting of the
// process, made once by the trainer from training.gelu_epilogue, as the attention kernel is):
//   check  where the run-time check finds cuBLASLt's GELU to be ours (the default)
//   on     wherever cuBLASLt offers them; the check still runs and logs how far they are
//   off    never: our GELU kernels
enum class GeluEpilogue { check, on, off };
void set_gelu_epilogue(GeluEpilogue policy);
GeluEpilogue gelu_epilogue();
// "check" | "on" | "off"; false for anything else.
bool parse_gelu_epilogue(std::string_view text, GeluEpilogue& policy);

void linear_forward(Tensor& out, Tensor* pre_activation, const Tensor& x, const Tensor& w,
                    const Tensor* bias, LinearActivation activation,
                    const Tensor* residual = nullptr);

// The weight and bias gradients of a linear layer:
//   dw [n, k] += dy [rows, n]^T @ x [rows, k];  dbias [n] (may be null) += column sums of dy.
// dw, dbias F32 and contiguous; dy, x contiguous, one dtype (F32 or BF16); all on one device.
// CPU: matmul then bias_add_backward, bit for bit those ops. CUDA: the bias gradient rides on
// the weight-gradient GEMM as cuBLASLt's BGRADB epilogue (which overwrites, so it lands in a
// scratch vector that is then added to dbias: a pass over [n] instead of over [rows, n]), where
// cuBLASLt has an algorithm for it; else as the CPU.
void linear_backward_weights(Tensor& dw, Tensor* dbias, const Tensor& dy, const Tensor& x);

// The input gradient of a linear layer whose input was gelu(pre_activation), taken on through
// that GELU (the MLP's down projection after the up projection):
//   dpre [rows, k] = gelu'(pre_activation [rows, k]) * (dy [rows, n] @ w [n, k])
// dy, w, pre_activation, dpre: contiguous, one dtype (F32 or BF16), one device; dpre is
// overwritten. (The GELU layer's bias gradient is its own: linear_backward_weights on dpre.)
// CPU: matmul, then gelu_backward in place, bit for bit those ops. CUDA: in BF16 where
// gelu_epilogue() allows (as linear_forward), one GEMM with cuBLASLt's DGELU epilogue (gelu'
// applied to the F32 product before rounding); else as the CPU.
void linear_backward_through_gelu(Tensor& dpre, const Tensor& dy, const Tensor& w,
                                  const Tensor& pre_activation);

}  // namespace ternion
