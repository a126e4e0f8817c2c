// Causal attention through cuDNN's fused scaled-dot-product attention (flash attention: the
// [T, T] scores never reach memory), built with cudnn-frontend's graph API. The contract is
// kernels/attention.h's: cuDNN's "Stats" output is exactly our lse (the natural-log
// log-sum-exp of the scaled scores), so forward and backward pair with the cuBLAS path too.
//
// Runs bf16 only (cuDNN's SDPA takes half-precision inputs; f32 attention uses cuBLAS), with
// head sizes cuDNN supports (multiples of 8; up to 128, more on newer cuDNN). The backward asks
// for cuDNN's deterministic algorithm, so two runs produce the same bits, as every other op does.
// Its price on Hopper (cudnn-frontend 1.32 with cuDNN before 9.25): that algorithm computes
// through a workspace holding dP, 2 B H T^2 bytes (bf16; ~400 MB for B 16, H 12, T 1024),
// taken from the caching allocator for the backward call alone. Nothing of size T^2 is kept
// between forward and backward, as the cuBLAS path keeps nothing either (both save lse only).
//
// Graphs are built on first use per (batch, seq, heads, head size) and pass, and kept: building
// one costs milliseconds to seconds, executing it microseconds. Only CUDA builds compile this;
// without cudnn-frontend (TN_HAVE_CUDNN_FRONTEND = 0) every problem is "unsupported" with that
// reason.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "framework/tensor.h"

namespace ternion::cuda {

enum class AttentionPass { forward, backward };

// Empty when cuDNN can run this pass of this problem (its graph builds, and qkv and every
// tensor in `operands` start on a 16-byte boundary as cuDNN's execute requires), else why not.
std::string cudnn_attention_unsupported_reason(const Tensor& qkv, std::int64_t n_head,
                                               AttentionPass pass = AttentionPass::forward,
                                               std::initializer_list<const Tensor*> operands = {});

void cudnn_attention_forward(Tensor& out, Tensor& lse, const Tensor& qkv, std::int64_t n_head);
void cudnn_attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                              const Tensor& out, const Tensor& lse, std::int64_t n_head);

}  // namespace ternion::cuda
