#include "layers/model_family.h"

#include <map>

namespace ternion {

const ModelFamily& gpt2_family();   // layers/gpt2_family.cpp
const ModelFamily& llama_family();  // layers/llama_family.cpp

namespace {

const std::map<std::string, const ModelFamily*>& families() {
  static const std::map<std::string, const ModelFamily*> table{{"gpt2", &gpt2_family()},
                                                               {"llama", &llama_family()}};
  return table;
}

}  // namespace

bool is_model_family(const std::string& name) { return families().count(name) > 0; }

std::string model_family_names() {
  std::string out;
  for (const auto& [name, family] : families()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

const ModelFamily& model_family(const std::string& name) {
  const auto it = families().find(name);
  TN_CHECK_AS(ConfigError, it != families().end(), "model.family: unknown family '", name,
              "' (known: ", model_family_names(), ")");
  return *it->second;
}

}  // namespace ternion
