// Causal multi-head scaled-dot-product attention, FlashAttention's contract: the forward saves
// each query row's log-sum-exp instead of the [T, T] probabilities, and the backward recomputes
// them. Memory O(B H T) instead of O(B H T^2); the cost is one more Q K^T product backward.
//
// qkv [B, T, H * 3 * hs] holds, for each head h, its query, key and value side by side:
// q = qkv[..., h*3*hs : h*3*hs+hs], k = next hs, v = next hs. Grouping by head (Megatron's
// layout) means a tensor-parallel rank's heads are one contiguous slice of the QKV projection.
// With s_ij = q_i . k_j / sqrt(hs) (keys j <= i only):
//   forward   lse[b,h,i] = log sum_j<=i exp(s_ij)                       [B, H, T]  F32
//             out[b,i,h*hs:(h+1)*hs] = sum_j<=i exp(s_ij - lse_i) v_j    [B, T, H*hs]
//   backward  p_ij = exp(s_ij - lse_i), D_i = dout_i . out_i,
//             dv_j = sum_i p_ij dout_i,  ds_ij = p_ij (dout_i . v_j - D_i) / sqrt(hs),
//             dq_i = sum_j ds_ij k_j,    dk_j = sum_i ds_ij q_i          dqkv overwritten
// lse is the natural-log log-sum-exp of the scaled scores: cuDNN's SDPA "Stats", so every
// implementation's saved state means the same thing.
//
// Implementations: CPU (kernels/cpu/attention.cpp); CUDA: cuDNN's fused flash attention
// (bf16, where cuDNN supports the shape) or batched cuBLAS GEMMs with fused softmax kernels,
// chosen per call by the process-wide setting below.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "framework/tensor.h"

namespace ternion {

void attention_forward(Tensor& out, Tensor& lse, const Tensor& qkv, std::int64_t n_head);
void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                        const Tensor& lse, std::int64_t n_head);

// Which CUDA implementation attention uses (CPU tensors have one). Like PyTorch's
// torch.backends.cuda.enable_flash_sdp: a setting of the process, made once by the trainer.
//   automatic  cuDNN's fused SDPA where it can run (bf16 on a cuDNN build that supports the
//              shape), otherwise cuBLAS
//   cudnn      cuDNN or an error naming why it cannot run
//   cublas     always the batched-GEMM path
enum class AttentionKernel { automatic, cudnn, cublas };
void set_attention_kernel(AttentionKernel kernel);
AttentionKernel attention_kernel();
// Sets the process's attention kernel for one scope, then restores the one before.
class AttentionKernelScope {
 public:
  explicit AttentionKernelScope(AttentionKernel kernel) : saved_(attention_kernel()) {
    set_attention_kernel(kernel);
  }
  ~AttentionKernelScope() { set_attention_kernel(saved_); }
  AttentionKernelScope(const AttentionKernelScope&) = delete;
  AttentionKernelScope& operator=(const AttentionKernelScope&) = delete;

 private:
  AttentionKernel saved_;
};

// Whether cuDNN's attention backward takes its deterministic algorithm (the default: runs
// repeat bit for bit) or its faster one, whose atomic adds into dQ round in a varying order
// (Megatron's --deterministic-mode, off). The other implementations are always deterministic.
void set_attention_deterministic(bool deterministic);
bool attention_deterministic();

// "auto" | "cudnn" | "cublas"; parse returns false for anything else.
bool parse_attention_kernel(std::string_view text, AttentionKernel& kernel);
std::string attention_kernel_name(AttentionKernel kernel);

}  // namespace ternion
