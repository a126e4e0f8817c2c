#include "training/hf_interop.h"

#include "framework/error.h"
#include "training/hf_export.h"
#include "training/hf_llama.h"

namespace ternion {

const HfMapping& hf_mapping(const ModelConfig& config) {
  static const HfMapping gpt2{"GPT-2", "GPT2LMHeadModel", to_hf_gpt2, from_hf_gpt2, hf_gpt2_config_json,
                              check_hf_gpt2_config};
  static const HfMapping llama{"Llama", "LlamaForCausalLM", to_hf_llama, from_hf_llama,
                               hf_llama_config_json, check_hf_llama_config};
  if (config.family == "llama") return llama;
  TN_CHECK_AS(ConfigError, config.family == "gpt2", "no Hugging Face mapping for model.family '",
              config.family, "'");
  return gpt2;
}

}  // namespace ternion
