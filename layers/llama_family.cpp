// Llama (Touvron et al. 2023; Hugging Face's LlamaForCausalLM): no learned positions (rotary
// ones in attention), pre-RMSNorm blocks of grouped-query attention and a SwiGLU MLP without
// biases, the head untied from the embedding unless model.tie_embeddings.
#include <string>

#include "layers/grouped_query_attention.h"
#include "layers/model_family.h"
#include "layers/rms_norm.h"
#include "layers/swiglu_mlp.h"

namespace ternion {

namespace {

class LlamaFamily : public ModelFamily {
 public:
  void validate(const ModelConfig& config, const ConfigDocument& doc) const override {
    const std::string heads = std::to_string(config.n_head);
    if (config.n_kv_head < 0 || (config.n_kv_head > 0 && config.n_head % config.n_kv_head != 0))
      config_fail(doc, "model", "n_kv_head",
                  "must divide model.n_head (" + heads + ") (0 = n_head), got " +
                      std::to_string(config.n_kv_head));
    if (config.d_model % config.n_head == 0 && config.head_size() % 2 != 0)
      config_fail(doc, "model", "n_head",
                  "gives heads of " + std::to_string(config.head_size()) +
                      " features (model.d_model / model.n_head): rotary embeddings rotate pairs, "
                      "so the head size must be even");
    if (!(config.rope_theta > 1)) config_fail(doc, "model", "rope_theta", "must be above 1");
    if (!(config.rope_scaling_factor == 0 || config.rope_scaling_factor >= 1))
      config_fail(doc, "model", "rope_scaling_factor", "must be 0 (no scaling) or at least 1");
    if (config.rope_scaling_factor > 0) {
      if (!(config.rope_scaling_low_freq_factor > 0))
        config_fail(doc, "model", "rope_scaling_low_freq_factor", "must be positive");
      if (!(config.rope_scaling_high_freq_factor > config.rope_scaling_low_freq_factor))
        config_fail(doc, "model", "rope_scaling_high_freq_factor",
                    "must be above model.rope_scaling_low_freq_factor");
      if (config.rope_scaling_original_context < 1)
        config_fail(doc, "model", "rope_scaling_original_context", "must be positive");
    }
    if (config.max_context < 0 || (config.max_context > 0 && config.max_context < config.seq_len))
      config_fail(doc, "model", "max_context",
                  "must be 0 (= model.seq_len) or at least model.seq_len (" +
                      std::to_string(config.seq_len) + "), got " +
                      std::to_string(config.max_context));
    // The norms run in float: an epsilon that rounds to 0 there divides an all-zero row by 0.
    if (!(config.norm_eps > 0 && config.norm_eps < 1 && static_cast<float>(config.norm_eps) > 0))
      config_fail(doc, "model", "norm_eps", "must be in (0, 1), and above 0 as a float");
    refuse_unused_keys(doc, "model", config, unused_keys(config),
                       "is read only with model.rope_scaling_factor > 0 (Llama 3.1's rotary "
                       "frequency scaling); set that too, or leave this key out");
  }

  std::vector<std::string> unused_keys(const ModelConfig& config) const override {
    if (config.rope_scaling_factor > 0) return {};
    return {"rope_scaling_low_freq_factor", "rope_scaling_high_freq_factor",
            "rope_scaling_original_context"};
  }

  std::vector<std::pair<std::string, double>> function_settings(
      const ModelConfig& config) const override {
    return {{"rope_theta", config.rope_theta},
            {"rope_scaling_factor", config.rope_scaling_factor},
            {"rope_scaling_low_freq_factor", config.rope_scaling_low_freq_factor},
            {"rope_scaling_high_freq_factor", config.rope_scaling_high_freq_factor},
            {"rope_scaling_original_context",
             static_cast<double>(config.rope_scaling_original_context)},
            {"norm_eps", config.norm_eps}};
  }

  TransformerBlockParts block_parts(const std::string& name, const ModelConfig& config,
                                    const TensorParallel& tp) const override {
    const auto eps = static_cast<float>(config.norm_eps);
    TransformerBlockParts parts;
    parts.norm_1 = std::make_unique<RmsNorm>(name + ".attn_norm", config.d_model, eps, tp);
    parts.attention = std::make_unique<GroupedQueryAttention>(name + ".attn", config, tp);
    parts.norm_2 = std::make_unique<RmsNorm>(name + ".mlp_norm", config.d_model, eps, tp);
    parts.mlp = std::make_unique<SwiGluMlp>(name + ".mlp", config, tp);
    return parts;
  }

  std::unique_ptr<Embedding> embedding(const ModelConfig& config,
                                       const TensorParallel& tp) const override {
    return std::make_unique<Embedding>("embedding", config, tp, /*learned_positions=*/false);
  }

  std::unique_ptr<Norm> final_norm(const ModelConfig& config,
                                   const TensorParallel& tp) const override {
    return std::make_unique<RmsNorm>(final_norm_name(), config.d_model,
                                     static_cast<float>(config.norm_eps), tp);
  }

  std::string final_norm_name() const override { return "norm"; }

  bool ties_embeddings(const ModelConfig& config) const override { return config.tie_embeddings; }
};

}  // namespace

const ModelFamily& llama_family() {
  static const LlamaFamily family;
  return family;
}

}  // namespace ternion
