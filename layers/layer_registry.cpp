#include "layers/layer_registry.h"

#include "layers/transformer_block.h"

namespace ternion {

LayerRegistry::LayerRegistry() {
  add("transformer", [](const BlockSpec& spec) {
    return std::make_unique<TransformerBlock>(spec.name, spec.config, spec.tp);
  });
}

LayerRegistry& LayerRegistry::instance() {
  static LayerRegistry registry;
  return registry;
}

void LayerRegistry::add(const std::string& type, BlockFactory factory) {
  factories_[type] = std::move(factory);
}

bool LayerRegistry::has(const std::string& type) const { return factories_.count(type) > 0; }

std::unique_ptr<Layer> LayerRegistry::create(const std::string& type, const BlockSpec& spec) const {
  auto it = factories_.find(type);
  TN_CHECK_AS(ConfigError, it != factories_.end(), "unknown block type '", type,
              "' (registered: ", names(), ")");
  return it->second(spec);
}

std::string LayerRegistry::names() const {
  std::string out;
  for (const auto& [name, factory] : factories_) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace ternion
