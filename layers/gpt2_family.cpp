// GPT-2 (Radford et al. 2019, Hugging Face's GPT2LMHeadModel): learned positions, pre-LayerNorm
// blocks of causal multi-head attention and a GELU MLP with biases, the head tied to wte.
#include "layers/attention.h"
#include "layers/layer_norm.h"
#include "layers/mlp.h"
#include "layers/model_family.h"

namespace ternion {

namespace {

class Gpt2Family : public ModelFamily {
 public:
  void validate(const ModelConfig& config, const ConfigDocument& doc) const override {
    refuse_unused_keys(doc, "model", config, unused_keys(config),
                       "is a llama key: model.family gpt2 has learned positions, LayerNorm with "
                       "eps 1e-5, multi-head attention and a head tied to the embedding");
  }

  std::vector<std::string> unused_keys(const ModelConfig&) const override {
    return {"n_kv_head",
            "rope_theta",
            "rope_scaling_factor",
            "rope_scaling_low_freq_factor",
            "rope_scaling_high_freq_factor",
            "rope_scaling_original_context",
            "max_context",
            "norm_eps",
            "tie_embeddings"};
  }

  // LayerNorm's epsilon is GPT-2's 1e-5 and positions are learned: nothing beyond the sizes.
  std::vector<std::pair<std::string, double>> function_settings(
      const ModelConfig&) const override {
    return {};
  }

  TransformerBlockParts block_parts(const std::string& name, const ModelConfig& config,
                                    const TensorParallel& tp) const override {
    TransformerBlockParts parts;
    parts.norm_1 = std::make_unique<LayerNorm>(name + ".ln_1", config.d_model, tp);
    parts.attention = std::make_unique<CausalSelfAttention>(name + ".attn", config, tp);
    parts.norm_2 = std::make_unique<LayerNorm>(name + ".ln_2", config.d_model, tp);
    parts.mlp = std::make_unique<Mlp>(name + ".mlp", config, tp);
    return parts;
  }

  std::unique_ptr<Embedding> embedding(const ModelConfig& config,
                                       const TensorParallel& tp) const override {
    return std::make_unique<Embedding>("embedding", config, tp, /*learned_positions=*/true);
  }

  std::unique_ptr<Norm> final_norm(const ModelConfig& config,
                                   const TensorParallel& tp) const override {
    return std::make_unique<LayerNorm>(final_norm_name(), config.d_model, tp);
  }

  std::string final_norm_name() const override { return "ln_f"; }

  bool ties_embeddings(const ModelConfig&) const override { return true; }
};

}  // namespace

const ModelFamily& gpt2_family() {
  static const Gpt2Family family;
  return family;
}

}  // namespace ternion
