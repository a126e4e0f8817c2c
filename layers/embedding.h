// Token embedding, with learned positions where the family has them (GPT-2's; Llama's
// positions are rotary, in attention), then dropout:
//   out[b, t, :] = dropout(wte[tokens[b, t]] + wpe[t])       (without positions: no wpe term)
// tokens are i32 [batch, seq]; wte is [padded_vocab, C], shared with the LM head where the
// family ties them (see lm_head.h); wpe is [seq_len, C]. backward returns an undefined tensor:
// there is nothing upstream of the tokens.
//
// Tensor parallel (VocabParallelEmbedding): each rank holds padded_vocab / tp rows of wte;
// tokens outside its rows look up zeros and the ranks' lookups are summed
// (reduce_from_tensor_region). Under sequence parallelism the sum is reduce-scattered along
// the sequence instead, and each rank adds the positions of its own share.
#pragma once

#include "layers/dropout.h"
#include "layers/model_config.h"

namespace ternion {

class Embedding : public Layer {
 public:
  Embedding(std::string name, const ModelConfig& config, const TensorParallel& tp = {},
            bool learned_positions = true);
  Tensor forward(const Tensor& tokens, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  double forward_flops_per_token(std::int64_t) override { return 0.0; }  // lookups

  Parameter& token_weight() { return wte_; }

 private:
  struct Saved : SavedActivations {
    Tensor tokens;
    std::int64_t first_position = 0;  // of this rank's share of the sequence
  };
  std::int64_t d_model_;
  TensorParallel tp_;
  Parameter wte_;
  Parameter wpe_;  // undefined without learned positions
  Dropout dropout_;
};

}  // namespace ternion
