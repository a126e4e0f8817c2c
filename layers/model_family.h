// A model family: what makes GPT-2 GPT-2 and Llama Llama, written down once
// (`model.family`). GptModel builds every pipeline chunk from it, and TransformerBlock its
// parts, so the trainer, the pipeline and the checkpoints never ask which family runs.
//
//   family  embedding             block ("transformer")                           final norm  head
//   gpt2    wte + learned wpe     LayerNorm, causal MHA (biases), GELU MLP         LayerNorm   tied
//   to wte llama   wte                   RMSNorm, GQA + rotary positions, SwiGLU, no bias RMSNorm
//   own weight (or tied)
//
// Adding a family: a class here (its own file, layers/<name>_family.cpp), an entry in
// model_family(), its Hugging Face mapping (training/hf_interop.cpp); CONTRIBUTING.md has the
// checklist.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/config_reader.h"
#include "layers/embedding.h"
#include "layers/transformer_block.h"

namespace ternion {

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // Checks the `model:` keys only this family reads, and refuses its unused_keys() where
  // `config` has them off their defaults (config_fail names the key).
  virtual void validate(const ModelConfig& config, const ConfigDocument& doc) const = 0;
  // The `model:` keys `config` has no use for: other families', and this one's that its other
  // settings leave unread.
  virtual std::vector<std::string> unused_keys(const ModelConfig& config) const = 0;
  // The `model:` settings besides its sizes that change the function the model computes
  // (norm epsilons, rotary bases), as numbers: a checkpoint records them, and a resume must
  // give the same.
  virtual std::vector<std::pair<std::string, double>> function_settings(
      const ModelConfig& config) const = 0;
  // The parts of the built-in block, parameters named under `name` ("h.3").
  virtual TransformerBlockParts block_parts(const std::string& name, const ModelConfig& config,
                                            const TensorParallel& tp) const = 0;
  virtual std::unique_ptr<Embedding> embedding(const ModelConfig& config,
                                               const TensorParallel& tp) const = 0;
  virtual std::unique_ptr<Norm> final_norm(const ModelConfig& config,
                                           const TensorParallel& tp) const = 0;
  virtual std::string final_norm_name() const = 0;  // its parameters' prefix: "ln_f"
  // Whether the LM head computes its logits against the token embedding's weight.
  virtual bool ties_embeddings(const ModelConfig& config) const = 0;
};

// The family named `name` ("gpt2", "llama"); ConfigError naming model.family otherwise.
const ModelFamily& model_family(const std::string& name);
bool is_model_family(const std::string& name);
std::string model_family_names();  // "gpt2, llama"

}  // namespace ternion
