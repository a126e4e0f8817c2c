// Hugging Face interop of each model family: the pure mappings that ternion-export and
// model.init_from use, looked up by `model.family`. Each family declares its own (GPT-2's in
// training/hf_export.h, Llama's in training/hf_llama.h); nothing else names them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"
#include "framework/strict_json.h"
#include "framework/tensor.h"
#include "layers/model_config.h"

namespace ternion {

struct HfMapping {
  const char* family_name;   // for messages: "GPT-2"
  const char* architecture;  // config.json's "architectures" entry
  // Our whole parameters by name -> Hugging Face's names and layouts, and back.
  std::vector<std::pair<std::string, Tensor>> (*to_hf)(const ModelConfig&,
                                                      const std::map<std::string, Tensor>&);
  std::map<std::string, Tensor> (*from_hf)(const ModelConfig&,
                                           const std::vector<std::pair<std::string, Tensor>>&);
  std::string (*config_json)(const ModelConfig&);
  // CheckpointError where a config.json (its text; `path` names it) does not describe `config`.
  void (*check_config)(const ModelConfig&, const std::string& json, const std::string& path);
};

const HfMapping& hf_mapping(const ModelConfig& config);

// The config.json an export writes: the family's, with bos_token_id and eos_token_id from the
// run's tokenizer (data/tokenizer.h), or null where it has no such token. Left out, they take
// transformers' defaults (GPT-2's 50256, Llama's 1 and 2), ids of another vocabulary at which
// transformers' generate would stop.
std::string hf_config_json(const ModelConfig& config, const Tokenizer& tokenizer);
// The tokenizer_config.json written beside a BPE's tokenizer.json: the same tokens by their
// text, so that transformers' tokenizer knows its bos_token and eos_token, and the context.
std::string hf_tokenizer_config_json(const ModelConfig& config, const Tokenizer& tokenizer);

// A Hugging Face JSON file's text (`path` names it) as a JSON object; CheckpointError naming
// the file where it is not valid JSON (framework/strict_json.h) or not an object.
Json read_hf_json_object(const std::string& text, const std::string& path);
// `key` of `object`; null where it is left out or given as null (transformers' default then).
const Json* hf_given(const Json& object, const char* key);
// A string's text, anything else as written: for messages and name comparisons.
std::string hf_text(const Json& value);
// The integer config.json `root` (`path`) gives for `key` as transformers reads it: the key,
// or its alias (transformers' attribute_map, GPT-2's num_attention_heads for n_head: where
// both are given they must agree), or `fallback`, transformers' default, where neither is.
// `label` is said in messages: "n_head", or "no n_head, so transformers' default n_head".
// CheckpointError where a value given is not an integer.
struct HfSize {
  std::int64_t value = 0;
  std::string label;
};
HfSize hf_size(const Json& root, const std::string& path, const char* key, std::int64_t fallback,
               const char* alias = nullptr);
// CheckpointError unless hf_size(...) is `ours`; `our_key` names ours in the message.
void check_hf_size(const Json& root, const std::string& path, const char* key,
                   std::int64_t fallback, std::int64_t ours, const char* our_key,
                   const char* alias = nullptr);
// CheckpointError where config.json `root` (`path`) is of another kind of model than `family`:
// its model_type is not `model_type`, or a class in its architectures list does not start
// with `class_prefix` ("Llama": LlamaForCausalLM, LlamaModel). Either may be left out.
void check_hf_model_kind(const Json& root, const std::string& path, const std::string& family,
                         const std::string& model_type, const std::string& class_prefix);

}  // namespace ternion
