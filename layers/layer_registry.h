// Block types selectable by name from YAML (`model.block: NAME`).
//
// A user adds a layer without touching the framework: write a Layer subclass that maps
// [batch, seq, d_model] to itself ([batch, seq / tp, d_model] under sequence parallelism),
// register a factory for it before the config is read, and name it in the config
// (CONTRIBUTING.md, "A new layer or block", has the rules). examples/custom_block/ does this:
//
//   ternion::LayerRegistry::instance().add("my_block",
//       [](const ternion::BlockSpec& spec) { return std::make_unique<MyBlock>(spec); });
//
// Registration is explicit (a call, not a static initialiser), because a static initialiser
// in a static library is dropped by the linker when nothing references its object file.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "layers/layer.h"
#include "layers/model_config.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

struct BlockSpec {
  std::string name;      // parameter-name prefix, "h.3"
  std::int64_t index;    // block index in the whole model
  const ModelConfig& config;
  const TensorParallel& tp;  // the tensor-parallel group to shard over (none on one rank)
};

using BlockFactory = std::function<std::unique_ptr<Layer>(const BlockSpec&)>;

// Runs `call`, which runs a user's block code, and returns what it threw as that code's
// failure: the message of an internal error or a std::exception, to be said as the block's
// (a user error and std::bad_alloc pass through as they are). Nothing when it succeeded.
std::optional<std::string> failure_of_user_code(const std::function<void()>& call);

class LayerRegistry {
 public:
  static LayerRegistry& instance();  // holds the built-in "transformer" block from the start

  // Replaces a user's entry of the same name; a built-in name is refused (ConfigError).
  void add(const std::string& type, BlockFactory factory);
  bool has(const std::string& type) const;
  bool is_built_in(const std::string& type) const;  // the library's own block
  std::unique_ptr<Layer> create(const std::string& type, const BlockSpec& spec) const;
  std::string names() const;  // "a, b, c"
  // The message for a `type` nobody registered: the registered names, and who registers one.
  std::string why_unknown(const std::string& type) const;

 private:
  LayerRegistry();
  std::map<std::string, BlockFactory> factories_;
  std::set<std::string> built_in_;
};

}  // namespace ternion
