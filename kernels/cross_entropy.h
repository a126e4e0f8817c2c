// Softmax cross-entropy over the vocabulary, whole or split over ranks by vocabulary.
//
// logits [N, V_padded]; only the first `vocab_size` columns are real tokens, the padding
// columns never enter the softmax and get zero gradient. targets i32 [N]; a row whose target
// is `ignore_index` has loss 0 and zero gradient. A target that is neither ignore_index nor in
// [0, vocab_size) is a DataError.
//   forward   losses[n] = logsumexp(logits[n, :vocab_size]) - logits[n, target]
//             also saves lse[n] = logsumexp(logits[n, :vocab_size]) for backward
//   backward  dlogits[n, v] = (softmax[n, v] - [v == target]) * dloss   (overwrites dlogits,
//             which may alias logits); every row has the same weight dloss, e.g.
//             1 / (valid tokens in the global batch) for a mean loss
//
// Vocabulary parallelism (Megatron's vocab-parallel cross-entropy): a rank holds
// logits [N, V_local] for global columns [vocab_start, vocab_start + V_local), the real ones
// being those below vocab_size, and the full logits are never gathered. Each rank computes
// per-row pieces and the caller reduces them across ranks:
//   row_max       -> all-reduce max    -> global_max
//   row_sum_exp   (with global_max) -> all-reduce sum -> global_sum_exp
//   target_logit  -> all-reduce sum    (exactly one rank holds each target's column)
//   finish        (the same on every rank) -> losses, lse
// The backward is this file's cross_entropy_backward with the rank's vocab_start and the
// finished lse; it needs no communication. On one rank (vocab_start 0, V_local = V_padded)
// the pieces give cross_entropy_forward, which is their composition.
#pragma once

#include <cstdint>

#include "framework/tensor.h"

namespace ternion {

inline constexpr std::int32_t kIgnoreIndex = -100;

void cross_entropy_forward(Tensor& losses, Tensor& lse, const Tensor& logits,
                           const Tensor& targets, std::int64_t vocab_size,
                           std::int32_t ignore_index = kIgnoreIndex);
// Column c of logits is global column vocab_start + c: it enters the softmax if that is below
// vocab_size (else its gradient is 0) and the one-hot hits where target == vocab_start + c.
// lse is the logsumexp over the whole vocabulary (cross_entropy_finish's under sharding).
void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, float dloss, std::int64_t vocab_size,
                            std::int32_t ignore_index = kIgnoreIndex,
                            std::int64_t vocab_start = 0);
// Forward and backward over the whole vocabulary in one op, where the loss's weight is known
// at forward time (training): cross_entropy_forward then cross_entropy_backward (dlogits may
// alias logits), bit for bit on a GPU and within rounding on the CPU. On a GPU one kernel does both
// with a block per row, so the backward's read of the row follows the forward's at once and mostly
// hits in L2: one read of the logits from memory instead of two. On the CPU, where the exponentials
// bound it, each logit's is taken once and kept in dlogits, then scaled to the softmax.
void cross_entropy_forward_backward(Tensor& losses, Tensor& lse, Tensor& dlogits,
                                    const Tensor& logits, const Tensor& targets, float dloss,
                                    std::int64_t vocab_size,
                                    std::int32_t ignore_index = kIgnoreIndex);

// Per-row pieces of a cross-entropy whose logits are split over ranks by vocabulary.
// logits [N, V_local] hold global columns [vocab_start, vocab_start + V_local); every other
// operand is one value per row.
//   row_max[n]      = max over this shard's real columns (global index < vocab_size), -inf if
//                     none
//   sum_exp[n]      = sum over those columns of exp(logit - global_max[n]), 0 if none
//   target_logit[n] = logits[n, target - vocab_start] if the target is in this shard, else 0
//                     (0 too for ignore_index rows); a target in another shard is fine, one
//                     outside [0, vocab_size) a DataError
void cross_entropy_row_max(Tensor& row_max, const Tensor& logits, std::int64_t vocab_start,
                           std::int64_t vocab_size);
void cross_entropy_row_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& global_max,
                               std::int64_t vocab_start, std::int64_t vocab_size);
void cross_entropy_target_logit(Tensor& target_logit, const Tensor& logits,
                                const Tensor& targets, std::int64_t vocab_start,
                                std::int64_t vocab_size,
                                std::int32_t ignore_index = kIgnoreIndex);
// losses[n] = lse[n] - target_logit[n] with lse[n] = global_max[n] + log(global_sum_exp[n]);
// 0 for ignored rows. Writes lse too (for backward).
void cross_entropy_finish(Tensor& losses, Tensor& lse, const Tensor& global_max,
                          const Tensor& global_sum_exp, const Tensor& target_logit,
                          const Tensor& targets, std::int32_t ignore_index = kIgnoreIndex);

}  // namespace ternion
