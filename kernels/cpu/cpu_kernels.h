// The CPU implementations behind kernels/*.h, on raw row-major pointers.
//
// Each is a template over the scalar type and instantiated for float (what training runs)
// and double (what the gradient tests run, so finite differences of our own forward code are
// exact enough to check our own backward code). The Tensor-level functions in kernels/*.cpp
// check shapes and dispatch here; nothing else calls these.
#pragma once

#include <cstdint>

#include "framework/philox.h"
#include "kernels/rotary_qkv_math.h"

namespace ternion::cpu {

using i64 = std::int64_t;

// out[M,N] = alpha * op(a) op(b) + beta * out  (BLAS gemm, row-major)
template <class T>
void matmul(T* out, const T* a, const T* b, i64 m, i64 n, i64 k, bool transpose_a,
            bool transpose_b, T alpha, T beta);
// The same with explicit row strides (ld_out, ld_a, ld_b: elements between rows as stored),
// so operands can be column slices of wider rows (attention's heads within qkv).
template <class T>
void matmul_strided(T* out, i64 ld_out, const T* a, i64 ld_a, const T* b, i64 ld_b, i64 m, i64 n,
                    i64 k, bool transpose_a, bool transpose_b, T alpha, T beta);

template <class T> void bias_add_forward(T* out, const T* bias, i64 rows, i64 cols);
template <class T> void bias_add_backward(T* dbias, const T* dout, i64 rows, i64 cols);

template <class T> void gelu_forward(T* out, const T* x, i64 n);
template <class T> void gelu_backward(T* dx, const T* x, const T* dout, i64 n);
// dx as gelu_backward, and dbias[c] += the sum of column c of dx ([rows, cols]).
template <class T>
void gelu_backward_bias(T* dx, T* dbias, const T* x, const T* dout, i64 rows, i64 cols);

template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                        i64 rows, i64 cols, T eps);
template <class T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x,
                         const T* weight, const T* mean, const T* rstd, i64 rows, i64 cols);

// RMSNorm (kernels/rms_norm.h): x [rows, cols], weight [cols], rstd [rows].
template <class T>
void rms_norm_forward(T* out, T* rstd, const T* x, const T* weight, i64 rows, i64 cols, T eps);
template <class T>
void rms_norm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight,
                       const T* rstd, i64 rows, i64 cols);

// SwiGLU (kernels/swiglu.h) over n features: gate_up holds 2n values, (gate, up) pair by pair.
template <class T> void swiglu_forward(T* out, const T* gate_up, i64 n);
template <class T> void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, i64 n);

// Causal attention (kernels/attention.h): lse [B, H, T]; backward recomputes the
// probabilities from lse.
template <class T>
void attention_forward(T* out, T* lse, const T* qkv, i64 batch, i64 seq, i64 n_head,
                       i64 head_size);
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        i64 batch, i64 seq, i64 n_head, i64 head_size);

template <class T>
void token_embedding_forward(T* out, const std::int32_t* tokens, const T* wte, i64 n_tokens,
                             i64 vocab_rows, i64 channels, i64 vocab_start);
template <class T>
void token_embedding_backward(T* dwte, const T* dout, const std::int32_t* tokens, i64 n_tokens,
                              i64 vocab_rows, i64 channels, i64 vocab_start);
template <class T>
void position_embedding_forward(T* out, const T* wpe, i64 batch, i64 seq, i64 channels);
template <class T>
void position_embedding_backward(T* dwpe, const T* dout, i64 batch, i64 seq, i64 channels);

// Rotary position embedding and grouped-query packing (kernels/rotary_qkv.h): grouped
// [B, T, G (r + 2) hs] -> packed [B, T, G r 3 hs], G = kv_heads, r = queries_per_kv.
template <class T>
void rotary_qkv_forward(T* packed, const T* grouped, i64 batch, i64 seq, i64 kv_heads,
                        i64 queries_per_kv, i64 head_size, i64 first_position,
                        const RotaryParameters& rope);
template <class T>
void rotary_qkv_backward(T* dgrouped, const T* dpacked, i64 batch, i64 seq, i64 kv_heads,
                         i64 queries_per_kv, i64 head_size, i64 first_position,
                         const RotaryParameters& rope);

// Cross-entropy; see kernels/cross_entropy.h. A shard's logits are [rows, local_vocab] holding
// global columns [vocab_start, vocab_start + local_vocab).
template <class T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const std::int32_t* targets,
                           i64 rows, i64 padded_vocab, i64 vocab_size, std::int32_t ignore_index);
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse,
                            const std::int32_t* targets, T dloss, i64 rows, i64 local_vocab,
                            i64 vocab_start, i64 vocab_size, std::int32_t ignore_index);
template <class T>
void cross_entropy_forward_backward(T* losses, T* lse, T* dlogits, const T* logits,
                                    const std::int32_t* targets, T dloss, i64 rows,
                                    i64 padded_vocab, i64 vocab_size, std::int32_t ignore_index);
template <class T>
void cross_entropy_row_max(T* row_max, const T* logits, i64 rows, i64 local_vocab,
                           i64 vocab_start, i64 vocab_size);
template <class T>
void cross_entropy_row_sum_exp(T* sum_exp, const T* logits, const T* global_max, i64 rows,
                               i64 local_vocab, i64 vocab_start, i64 vocab_size);
template <class T>
void cross_entropy_target_logit(T* target_logit, const T* logits, const std::int32_t* targets,
                                i64 rows, i64 local_vocab, i64 vocab_start, i64 vocab_size,
                                std::int32_t ignore_index);
template <class T>
void cross_entropy_finish(T* losses, T* lse, const T* global_max, const T* global_sum_exp,
                          const T* target_logit, const std::int32_t* targets, i64 rows,
                          std::int32_t ignore_index);

template <class T> void add(T* out, const T* a, const T* b, i64 n);
template <class T> void accumulate(T* out, const T* x, i64 n);
template <class T> void scale(T* x, T factor, i64 n);
template <class T> double sum_of_squares(const T* x, i64 n);
template <class T> bool all_finite(const T* x, i64 n);

// x viewed as [batch, seq, channels]; see kernels/dropout.h for the global index.
template <class T>
void dropout_forward(T* out, const T* x, float p, RngStream stream, i64 batch, i64 seq,
                     i64 channels, i64 sample_offset, i64 seq_offset, i64 seq_total);
template <class T>
void dropout_backward(T* dx, const T* dout, float p, RngStream stream, i64 batch, i64 seq,
                      i64 channels, i64 sample_offset, i64 seq_offset, i64 seq_total);

void adamw_update(float* param, const float* grad, float* m, float* v, i64 n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                  i64 step);
void sgd_update(float* param, const float* grad, float* momentum_buffer, i64 n, float lr,
                float momentum, float weight_decay, float grad_scale);

}  // namespace ternion::cpu
