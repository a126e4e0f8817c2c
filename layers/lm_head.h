// The language-model head and loss: the family's final norm, logits against the output
// weight (the token embedding's where the family ties them), softmax cross-entropy.
//   h = norm(x)                       [N, C]   (N = batch * seq)
//   logits = h W^T                    [N, padded_vocab]; padding columns are masked
//   losses[n] = cross_entropy(logits[n], targets[n])
// With the backward's loss weight known at forward time (MicroBatchInfo::loss_weight, as in
// training) and one tensor rank, the forward also turns the logits into their gradient in the
// same pass (cross_entropy_forward_backward), and the backward starts from it.
// forward returns each token's loss (F32 [N], on the device; 0 for an ignored target), left
// there so that the host need not wait for the device until it reads them (`summed_loss`);
// backward takes the weight of each token's loss (1 / tokens in the global batch, for a mean)
// and returns dx. The logits are turned into their gradient in place, so the head holds one
// [N, V] buffer, not two.
//
// Tensor parallel: each rank holds its vocabulary rows of W and so its [N, V / tp] slice of
// the logits, which are never gathered. The cross-entropy is vocab-parallel (Megatron-LM): the
// row maxima are all-reduced (max), then the sums of exponentials and the target logits (sum);
// every rank then has every token's loss, and the gradient of its logits needs no
// communication. h enters through copy_to_tensor_region (backward all-reduces dh); under
// sequence parallelism the norm runs on this rank's share of the sequence and h is all-gathered.
#pragma once

#include <memory>
#include <optional>

#include "layers/block_parts.h"
#include "layers/model_config.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

// The sum of a micro-batch's per-token losses, in order, in double (the same bits on every
// device). Reading them waits for the device.
double summed_loss(const Tensor& losses);

class LanguageModelHead {
 public:
  // `weight` [padded_vocab (/ tp), C] is the output weight (or shard), not owned: the
  // Embedding's wte where tied (on a last pipeline chunk without the embedding, the chunk's
  // own copy of it), else the model's own.
  LanguageModelHead(std::string name, const ModelConfig& config, std::unique_ptr<Norm> norm,
                    Parameter& weight, const TensorParallel& tp = {});

  Tensor forward(const Tensor& hidden, const Tensor& targets, ActivationContext& ctx);
  Tensor backward(float loss_weight, ActivationContext& ctx);
  // Logits [batch, seq, padded_vocab] over the whole vocabulary, without the loss
  // (evaluation and generation; gathered over the tensor-parallel group).
  Tensor logits(const Tensor& hidden, ActivationContext& ctx);
  void collect_parameters(std::vector<Parameter*>& out);  // the norm's only: W is the model's
  // The norm's and the logits' GEMM over this rank's vocabulary shard.
  double forward_flops_per_token(std::int64_t seq_len);

 private:
  struct Saved : SavedActivations {
    Tensor normed, logits, lse, targets;  // [N, C] (whole sequence), [N, V / tp], [N], [N]
    Shape sequence_shape;                 // [batch, seq, C] of the whole sequence
    // Set where the forward left the logits' gradient in `logits` (with this loss weight).
    std::optional<float> gradient_weight;
  };
  // The norm, then the whole sequence on every rank: [N, C].
  Tensor normed_rows(const Tensor& hidden, ActivationContext& ctx);
  std::string name_;
  std::int64_t vocab_size_;
  TensorParallel tp_;
  std::unique_ptr<Norm> norm_;
  Parameter& weight_;
};

}  // namespace ternion
