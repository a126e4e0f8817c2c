#include "training/hf_interop.h"

#include <optional>
#include <utility>

#include "framework/error.h"
#include "training/hf_export.h"
#include "training/hf_llama.h"

namespace ternion {

const HfMapping& hf_mapping(const ModelConfig& config) {
  static const HfMapping gpt2{"GPT-2",      "GPT2LMHeadModel",   to_hf_gpt2,
                              from_hf_gpt2, hf_gpt2_config_json, check_hf_gpt2_config};
  static const HfMapping llama{"Llama", "LlamaForCausalLM", to_hf_llama, from_hf_llama,
                               hf_llama_config_json, check_hf_llama_config};
  if (config.family == "llama") return llama;
  TN_CHECK_AS(ConfigError, config.family == "gpt2", "no Hugging Face mapping for model.family '",
              config.family, "'");
  return gpt2;
}

std::string hf_config_json(const ModelConfig& config, const Tokenizer& tokenizer) {
  OrderedJson root = OrderedJson::parse(hf_mapping(config).config_json(config));
  auto id = [](std::int32_t token) { return token >= 0 ? OrderedJson(token) : OrderedJson(); };
  root["bos_token_id"] = id(tokenizer.begin_of_text_id());
  root["eos_token_id"] = id(tokenizer.end_of_text_id());
  return json_text(root, 2) + "\n";
}

std::string hf_tokenizer_config_json(const ModelConfig& config, const Tokenizer& tokenizer) {
  auto text = [](const std::string& token) {
    return token.empty() ? OrderedJson() : OrderedJson(token);
  };
  const OrderedJson root = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                            {"bos_token", text(tokenizer.begin_of_text())},
                            {"eos_token", text(tokenizer.end_of_text())},
                            {"model_max_length", config.context_made_for()},
                            {"clean_up_tokenization_spaces", false}};
  return json_text(root, 2) + "\n";
}

Json read_hf_json_object(const std::string& text, const std::string& path) {
  std::string why;
  std::optional<Json> root = parse_strict_json(text, &why);
  TN_CHECK_AS(CheckpointError, root.has_value(), "'", path, "' is not valid JSON: ", why);
  TN_CHECK_AS(CheckpointError, root->is_object(), "'", path, "' is not a JSON object");
  return std::move(*root);
}

const Json* hf_given(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string hf_text(const Json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

HfSize hf_size(const Json& root, const std::string& path, const char* key, std::int64_t fallback,
               const char* alias) {
  auto integer = [&](const char* name) -> std::optional<std::int64_t> {
    const Json* node = hf_given(root, name);
    if (node == nullptr) return std::nullopt;
    const std::optional<std::int64_t> value = json_int64(*node);
    TN_CHECK_AS(CheckpointError, value.has_value(), "'", path, "': ", name, " is not an integer");
    return value;
  };
  const std::optional<std::int64_t> direct = integer(key);
  const std::optional<std::int64_t> aliased = alias ? integer(alias) : std::nullopt;
  TN_CHECK_AS(CheckpointError, !direct || !aliased || *direct == *aliased, "'", path, "' gives ",
              key, " ", direct.value_or(0), " and ", alias ? alias : "", " ", aliased.value_or(0),
              ", which transformers reads as one setting");
  if (aliased) return {*aliased, alias};
  if (direct) return {*direct, key};
  return {fallback, "no " + std::string(key) + ", so transformers' default " + key};
}

void check_hf_size(const Json& root, const std::string& path, const char* key,
                   std::int64_t fallback, std::int64_t ours, const char* our_key,
                   const char* alias) {
  const HfSize theirs = hf_size(root, path, key, fallback, alias);
  TN_CHECK_AS(CheckpointError, theirs.value == ours, "'", path, "' gives ", theirs.label, " ",
              theirs.value, ", but ", our_key, " is ", ours);
}

void check_hf_model_kind(const Json& root, const std::string& path, const std::string& family,
                         const std::string& model_type, const std::string& class_prefix) {
  if (const Json* type = hf_given(root, "model_type"))
    TN_CHECK_AS(CheckpointError, hf_text(*type) == model_type, "'", path,
                "' gives model_type '", hf_text(*type), "', but model.family is ", family,
                ": a '", hf_text(*type), "' model cannot start a ", family, " one");
  const Json* classes = hf_given(root, "architectures");
  if (classes == nullptr) return;
  TN_CHECK_AS(CheckpointError, classes->is_array(), "'", path,
              "': architectures is not a list of class names");
  for (const Json& name : *classes)
    TN_CHECK_AS(CheckpointError, hf_text(name).rfind(class_prefix, 0) == 0, "'", path,
                "' gives architectures ", hf_text(*classes), ", but model.family is ", family,
                ": a ", hf_text(name), " cannot start a ", family, " model");
}

}  // namespace ternion
