// The CUDA side of every op: same names and arguments as the dispatch headers in kernels/,
// which check shapes and devices once and then call the CPU template (kernels/cpu/) or the
// function here. Each runs on cuda::compute_stream() and checks its launch.
//
// dtypes: F32 everywhere; BF16 where mixed precision needs it (each function's comment says
// which tensors may be BF16). Statistics the backward pass needs (LayerNorm mean/rstd,
// cross-entropy log-sum-exp) and every reduction stay F32; accumulation is always in F32.
//
// Only CUDA builds compile or include this header.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "framework/philox.h"
#include "framework/tensor.h"
#include "kernels/rotary_qkv_math.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"

namespace ternion::cuda {

// out = alpha * op(a) @ op(b) + beta * out through cuBLASLt. a and b: both F32 or both BF16;
// out: their dtype, or F32 with BF16 inputs (weight gradients accumulate in F32). Always
// F32 accumulation (CUBLAS_COMPUTE_32F; TF32 is not used, so F32 matches the CPU).
void matmul(Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
            float alpha, float beta);

// out [rows, n] = x [rows, k] @ w [n, k]^T + bias [n] in one cuBLASLt call (bias epilogue), for
// kernels/linear.cpp's linear_forward. All four one dtype, F32 or BF16 (the bias has out's
// dtype, cuBLASLt's default bias type). Returns false, having launched nothing, where cuBLASLt
// has no algorithm with the epilogue for this problem, the bias is not 16-byte aligned, or
// k = 0: the caller then runs matmul + bias_add_forward.
bool matmul_bias(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias);
// The same with the bias optional and a residual [rows, n] (out's dtype, contiguous, not out)
// added by the GEMM as its C matrix (beta = 1): out = x @ w^T (+ bias) + residual, rounded
// once. Returns false as matmul_bias does, also with a residual alone (no bias) where
// cuBLASLt refuses the GEMM with a separate C or k = 0: the caller adds the residual then.
bool matmul_bias_residual(Tensor& out, const Tensor& x, const Tensor& w, const Tensor* bias,
                          const Tensor* residual);

// The MLP's GEMMs with cuBLASLt's GELU epilogues, BF16 only (kernels/cuda/matmul.cpp):
//   matmul_bias_gelu: pre_activation [rows, n] = x [rows, k] @ w [n, k]^T (+ bias [n]) and
//     out [rows, n] = gelu(pre_activation), both written by the GEMM (GELU_AUX(_BIAS));
//   matmul_dgelu: dx [rows, n] = (dy [rows, k] @ w [k, n]) * gelu'(pre_activation [rows, n])
//     (DGELU; the product is multiplied in F32, then rounded once).
// Each returns false, having launched nothing, where cuBLASLt has no algorithm for it, n is not
// a multiple of 8, the pre-activation or bias is not 16-byte aligned, or k = 0. Callers use
// them only where gelu_epilogues_agree().
bool matmul_bias_gelu(Tensor& out, Tensor& pre_activation, const Tensor& x, const Tensor& w,
                      const Tensor* bias);
bool matmul_dgelu(Tensor& dx, const Tensor& dy, const Tensor& w, const Tensor& pre_activation);

// dw [n, k] += dy [rows, n]^T @ x [rows, k] and bias_grad [n] = column sums of dy
// (overwritten) in one cuBLASLt call (BGRADB epilogue), for kernels/linear.cpp's
// linear_backward_weights. dw and bias_grad F32; dy and x both F32 or both BF16. Returns false,
// having launched nothing, where cuBLASLt has no algorithm for it, bias_grad is not 16-byte
// aligned, or a dimension is 0: the caller then runs matmul + bias_add_backward.
bool matmul_weight_and_bias_grad(Tensor& dw, Tensor& bias_grad, const Tensor& dy,
                                 const Tensor& x);

// Whether cuBLASLt's GELU epilogues compute GPT-2's GELU (the tanh form, kernels/gelu_math.h)
// to bf16's rounding for the MLP's GEMMs of this shape: out [rows, features] from `inner`
// inputs forward (matmul_bias_gelu), dx [rows, features] from `inner` backward (matmul_dgelu).
// cuBLASLt does not say which GELU it computes, and picks its kernels by shape. Decided once
// per shape per process on first call (kernels/cuda/gelu_epilogue_check.cpp: the three
// epilogue forms on a sweep of pre-activations over [-8, 8] against the tanh form in double,
// synchronising the device once), and logged with the largest deviation found.
bool gelu_epilogues_agree(std::int64_t features, std::int64_t inner);

// out [rows, n] += bias [n] (out F32/BF16, bias the same dtype); dbias (F32) += column sums.
void bias_add_forward(Tensor& out, const Tensor& bias);
void bias_add_backward(Tensor& dbias, const Tensor& dout);

// out, x, dx, dout: all one dtype, F32 or BF16 (math in F32 via gelu_math.h).
void gelu_forward(Tensor& out, const Tensor& x);
void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dout, Tensor* dbias);

// x/out/dx/dout F32 or BF16; weight/bias the same dtype as x; mean/rstd F32;
// dweight/dbias F32 (accumulate +=).
void layer_norm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, float eps);
void layer_norm_backward(Tensor& dx, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                         const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor* residual);

// x/out/dx/dout/weight F32 or BF16 (one dtype); rstd F32; dweight F32 (accumulates +=).
void rms_norm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& weight, float eps);
void rms_norm_backward(Tensor& dx, Tensor& dweight, const Tensor& dout, const Tensor& x,
                       const Tensor& weight, const Tensor& rstd, const Tensor* residual);

// gate_up/dgate_up [..., 2F], out/dout [..., F]: one dtype, F32 or BF16 (math in F32 via
// swiglu_math.h).
void swiglu_forward(Tensor& out, const Tensor& gate_up);
void swiglu_backward(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up);

// qkv [B, T, 3C] (per-head [q|k|v] layout, as kernels/attention.h), out/dout [B, T, C], dqkv:
// all F32 or all BF16; lse [B, H, T] F32. `kernel` picks cuDNN's fused SDPA or the cuBLAS
// path (kernels/attention.h); both read and write the same lse.
void attention_forward(Tensor& out, Tensor& lse, const Tensor& qkv, std::int64_t n_head,
                       AttentionKernel kernel);
void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                        const Tensor& lse, std::int64_t n_head, AttentionKernel kernel);

// logits/dlogits F32 or BF16 (one dtype); losses, lse, maxima, sums: F32; targets I32.
void cross_entropy_forward(Tensor& losses, Tensor& lse, const Tensor& logits,
                           const Tensor& targets, std::int64_t vocab_size,
                           std::int32_t ignore_index);
void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, float dloss, std::int64_t vocab_size,
                            std::int32_t ignore_index, std::int64_t vocab_start);
void cross_entropy_forward_backward(Tensor& losses, Tensor& lse, Tensor& dlogits,
                                    const Tensor& logits, const Tensor& targets, float dloss,
                                    std::int64_t vocab_size, std::int32_t ignore_index);
void cross_entropy_row_max(Tensor& row_max, const Tensor& logits, std::int64_t vocab_start,
                           std::int64_t vocab_size);
void cross_entropy_row_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& global_max,
                               std::int64_t vocab_start, std::int64_t vocab_size);
void cross_entropy_target_logit(Tensor& target_logit, const Tensor& logits,
                                const Tensor& targets, std::int64_t vocab_start,
                                std::int64_t vocab_size, std::int32_t ignore_index);
void cross_entropy_finish(Tensor& losses, Tensor& lse, const Tensor& global_max,
                          const Tensor& global_sum_exp, const Tensor& target_logit,
                          const Tensor& targets, std::int32_t ignore_index);

// x/out/dx/dout F32 or BF16 (one dtype); the mask is Philox's, bit for bit the CPU's.
void dropout_forward(Tensor& out, const Tensor& x, float p, RngStream stream,
                     const GlobalPosition& position);
void dropout_backward(Tensor& dx, const Tensor& dout, float p, RngStream stream,
                      const GlobalPosition& position);

// out F32/BF16 = wte's dtype; tokens I32; dwte/dwpe F32 (accumulate +=). The token backward
// is deterministic: no float atomics, so every run sums in the same order.
void token_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                             std::int64_t vocab_start);
void token_embedding_backward(Tensor& dwte, const Tensor& dout, const Tensor& tokens,
                              std::int64_t vocab_start);
void position_embedding_forward(Tensor& out, const Tensor& wpe);
void position_embedding_backward(Tensor& dwpe, const Tensor& dout);

// packed/grouped, dgrouped/dpacked: all F32 or all BF16 (math in F32; kernels/rotary_qkv.h).
// Head size at most 512: the inverse frequencies travel as a kernel argument, computed on the
// host as the CPU op does. The backward's key/value sums add the heads in order, no atomics.
void rotary_qkv_forward(Tensor& packed, const Tensor& grouped, std::int64_t kv_heads,
                        std::int64_t queries_per_kv, std::int64_t first_position,
                        const RotaryParameters& rope);
void rotary_qkv_backward(Tensor& dgrouped, const Tensor& dpacked, std::int64_t kv_heads,
                         std::int64_t queries_per_kv, std::int64_t first_position,
                         const RotaryParameters& rope);

// Elementwise (one dtype per call, F32 or BF16; `accumulate` also takes F32 out += BF16 x).
void add(Tensor& out, const Tensor& a, const Tensor& b);
void accumulate(Tensor& out, const Tensor& x);
void scale(Tensor& x, float factor);
// Each tensor's sum of x^2 (one dtype for all); one launch, and one host synchronisation.
std::vector<double> sums_of_squares(std::span<const Tensor> xs);
// Zeroes every tensor (contiguous, any dtype, one device) in one multi-tensor launch.
void zero_many(std::span<Tensor> xs);
bool all_finite(const Tensor& x);        // synchronises
// out = in converted (F32 <-> BF16, or a plain copy for equal dtypes); same shape.
void convert(Tensor& out, const Tensor& in);
// outs[i] = ins[i] rounded to BF16 for every i (F32 inputs, BF16 outputs, contiguous, equal
// shapes): one launch for all.
void convert_many_f32_to_bf16(std::span<Tensor> outs, std::span<const Tensor> ins);

// Optimizer updates, all F32. The `_many` forms update every tensor in one launch
// (multi-tensor apply): element i of each vector belongs together.
void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h);
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h);
void adamw_update_many(std::vector<AdamWTensors>& tensors, const AdamWHyper& h);

}  // namespace ternion::cuda
