#include "layers/layer_registry.h"

#include <new>

#include "layers/transformer_block.h"

namespace ternion {

LayerRegistry::LayerRegistry() {
  add("transformer", [](const BlockSpec& spec) {
    return std::make_unique<TransformerBlock>(spec.name, spec.config, spec.tp);
  });
  built_in_ = {"transformer"};
}

std::optional<std::string> failure_of_user_code(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    if (e.is_user_error()) throw;
    return std::string(e.what());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

LayerRegistry& LayerRegistry::instance() {
  static LayerRegistry registry;
  return registry;
}

void LayerRegistry::add(const std::string& type, BlockFactory factory) {
  // Under the library's name, a user's block would be saved as ours: the stock generator and
  // ternion-export would then read its checkpoints as our block's, without its own weights.
  TN_CHECK_AS(ConfigError, !is_built_in(type), "block type '", type,
              "' is the library's own: register yours under another name");
  factories_[type] = std::move(factory);
}

bool LayerRegistry::is_built_in(const std::string& type) const {
  return built_in_.count(type) > 0;
}

bool LayerRegistry::has(const std::string& type) const { return factories_.count(type) > 0; }

std::unique_ptr<Layer> LayerRegistry::create(const std::string& type, const BlockSpec& spec) const {
  auto it = factories_.find(type);
  TN_CHECK_AS(ConfigError, it != factories_.end(), why_unknown(type));
  if (is_built_in(type)) return it->second(spec);  // our code: a failed check is our bug
  // A registered factory is the user's code: what it throws is said as its block type's
  // failure, not as an internal error of ours.
  std::unique_ptr<Layer> block;
  if (const auto failed = failure_of_user_code([&] { block = it->second(spec); }))
    TN_THROW(ConfigError, "block type '", type, "' could not build block ", spec.name, ": ",
             *failed);
  TN_CHECK_AS(ConfigError, block != nullptr, "block type '", type,
              "': its factory returned no layer for block ", spec.name);
  return block;
}

std::string LayerRegistry::why_unknown(const std::string& type) const {
  return "unknown block type '" + type + "' (registered: " + names() +
         "; a block type of your own is registered by the program built with it, as "
         "examples/custom_block/'s custom_block_train and custom_block_generate do)";
}

std::string LayerRegistry::names() const {
  std::string out;
  for (const auto& [name, factory] : factories_) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace ternion
