// Token and learned position embeddings.
//
// Token embedding, table wte [V_local, C] holding global vocabulary rows
// [vocab_start, vocab_start + V_local) (the whole vocabulary on one rank; one shard of it under
// vocabulary parallelism, where tokens outside the shard produce zeros and the ranks' outputs
// are summed):
//   forward   out[b,t,:]  = wte[tokens[b,t] - vocab_start] or 0     (overwrites out [B, T, C])
//   backward  dwte[row]  += sum of dout[b,t,:] over tokens in the shard (accumulates;
//             deterministic: the order of summation does not depend on the thread count)
// Position embedding, table wpe [T_max, C]:
//   forward   out[b,t,:] += wpe[t]                                   (in place)
//   backward  dwpe[t]    += sum_b dout[b,t,:]                        (accumulates)
// tokens are i32 [B, T].
#pragma once

#include <cstdint>

#include "framework/tensor.h"

namespace ternion {

void token_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                             std::int64_t vocab_start = 0);
void token_embedding_backward(Tensor& dwte, const Tensor& dout, const Tensor& tokens,
                              std::int64_t vocab_start = 0);
void position_embedding_forward(Tensor& out, const Tensor& wpe);
void position_embedding_backward(Tensor& dwpe, const Tensor& dout);

}  // namespace ternion
