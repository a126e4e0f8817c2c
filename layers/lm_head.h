// The language-model head and loss: final LayerNorm, logits against the (tied) token
// embedding, softmax cross-entropy.
//   h = ln_f(x)                       [N, C]   (N = batch * seq)
//   logits = h wte^T                  [N, padded_vocab]; padding columns are masked
//   losses[n] = cross_entropy(logits[n], targets[n])
// forward returns the summed loss of the micro-batch; backward takes the weight of each
// token's loss (1 / tokens in the global batch, for a mean) and returns dx. The logits are
// turned into their gradient in place, so the head holds one [N, V] buffer, not two.
#pragma once

#include "layers/layer_norm.h"
#include "layers/model_config.h"

namespace ternion {

class LanguageModelHead {
 public:
  // `tied_weight` is the token embedding's parameter, owned by the Embedding layer.
  LanguageModelHead(std::string name, const ModelConfig& config, Parameter& tied_weight);

  double forward(const Tensor& hidden, const Tensor& targets, ActivationContext& ctx);
  Tensor backward(float loss_weight, ActivationContext& ctx);
  // Logits [batch, seq, padded_vocab] without the loss (evaluation and generation).
  Tensor logits(const Tensor& hidden, ActivationContext& ctx);
  void collect_parameters(std::vector<Parameter*>& out);  // ln_f only: wte is the embedding's

 private:
  struct Saved : SavedActivations {
    Tensor normed, logits, lse, targets;
    Shape hidden_shape;
  };
  std::string name_;
  std::int64_t vocab_size_;
  LayerNorm ln_f_;
  Parameter& wte_;
};

}  // namespace ternion
