#include "layers/model_config.h"

#include <string>

#include "layers/layer_registry.h"

namespace ternion {

void ModelConfig::validate(const ConfigDocument& doc) const {
  const char* kSection = "model";
  auto positive = [&](const char* key, std::int64_t value) {
    if (value < 1) config_fail(doc, kSection, key, "must be at least 1, got " + std::to_string(value));
  };
  positive("vocab_size", vocab_size);
  positive("vocab_pad_multiple", vocab_pad_multiple);
  positive("seq_len", seq_len);
  positive("n_layer", n_layer);
  positive("n_head", n_head);
  positive("d_model", d_model);
  if (d_ff < 0) config_fail(doc, kSection, "d_ff", "must not be negative (0 = 4 * d_model)");
  if (d_model % n_head != 0)
    config_fail(doc, kSection, "n_head",
                "n_head (" + std::to_string(n_head) + ") does not divide model.d_model (" +
                    std::to_string(d_model) + ")");
  if (!(dropout >= 0 && dropout < 1)) config_fail(doc, kSection, "dropout", "must be in [0, 1)");
  if (!(init_std > 0)) config_fail(doc, kSection, "init_std", "must be positive");
  if (!LayerRegistry::instance().has(block))
    config_fail(doc, kSection, "block",
                "unknown block type '" + block + "' (registered: " +
                    LayerRegistry::instance().names() + ")");
}

}  // namespace ternion
