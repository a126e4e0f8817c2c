// Softmax cross-entropy over the vocabulary.
//
// logits [N, V_padded]; only the first `vocab_size` columns are real tokens, the padding
// columns never enter the softmax and get zero gradient. targets i32 [N]; a row whose target
// is `ignore_index` has loss 0 and zero gradient.
//   forward   losses[n] = logsumexp(logits[n, :vocab_size]) - logits[n, target]
//             also saves lse[n] = logsumexp(logits[n, :vocab_size]) for backward
//   backward  dlogits[n, v] = (softmax[n, v] - [v == target]) * dloss   (overwrites dlogits,
//             which may alias logits); every row has the same weight dloss, e.g.
//             1 / (valid tokens in the global batch) for a mean loss
#pragma once

#include <cstdint>

#include "framework/tensor.h"

namespace ternion {

inline constexpr std::int32_t kIgnoreIndex = -100;

void cross_entropy_forward(Tensor& losses, Tensor& lse, const Tensor& logits,
                           const Tensor& targets, std::int64_t vocab_size,
                           std::int32_t ignore_index = kIgnoreIndex);
void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, float dloss, std::int64_t vocab_size,
                            std::int32_t ignore_index = kIgnoreIndex);

}  // namespace ternion
