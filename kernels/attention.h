// Causal multi-head scaled-dot-product attention.
//
// qkv [B, T, H * 3 * hs] holds, for each head h, its query, key and value side by side:
// q = qkv[..., h*3*hs : h*3*hs+hs], k = next hs, v = next hs. Grouping by head (Megatron's
// layout) means a tensor-parallel rank's heads are one contiguous slice of the QKV projection.
//   forward   probs[b,h,i,j] = softmax_j<=i(q_i . k_j / sqrt(hs)), 0 for j > i   [B, H, T, T]
//             out[b,i,h*hs:(h+1)*hs] = sum_j probs[b,h,i,j] v_j                   [B, T, H*hs]
//   backward  dqkv overwritten, from dout, qkv and the saved probs
#pragma once

#include <cstdint>

#include "framework/tensor.h"

namespace ternion {

void attention_forward(Tensor& out, Tensor& probs, const Tensor& qkv, std::int64_t n_head);
void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                        std::int64_t n_head);

}  // namespace ternion
