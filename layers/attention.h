// Causal multi-head self-attention: QKV projection [C -> 3C] (per head [q | k | v], see
// kernels/attention.h), scaled-dot-product attention, output projection [C -> C], dropout on
// the output. [batch, seq, C] -> [batch, seq, C].
#pragma once

#include <memory>

#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/model_config.h"

namespace ternion {

class CausalSelfAttention : public Layer {
 public:
  CausalSelfAttention(std::string name, const ModelConfig& config);
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

 private:
  struct Saved : SavedActivations {
    Tensor qkv, probs;  // [B, T, 3C], [B, H, T, T]
  };
  std::int64_t n_head_;
  Linear qkv_;
  Linear proj_;
  Dropout dropout_;
};

}  // namespace ternion
