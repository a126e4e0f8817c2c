#include "layers/model_config.h"

#include <string>

#include "layers/layer_registry.h"
#include "layers/model_family.h"

namespace ternion {

void ModelConfig::validate(const ConfigDocument& doc) const {
  const char* kSection = "model";
  if (!is_model_family(family))
    config_fail(doc, kSection, "family",
                "unknown family '" + family + "' (known: " + model_family_names() + ")");
  // Token ids are int32 and the kernels index a row's columns, a head's positions and a
  // layer's features in 32 bits: every size stays below 2^31.
  constexpr std::int64_t kMaxSize = (std::int64_t{1} << 31) - 1;
  auto positive = [&](const char* key, std::int64_t value) {
    if (value < 1)
      config_fail(doc, kSection, key, "must be at least 1, got " + std::to_string(value));
    if (value > kMaxSize)
      config_fail(doc, kSection, key,
                  "must be below 2^31, got " + std::to_string(value));
  };
  positive("vocab_size", vocab_size);
  positive("vocab_pad_multiple", vocab_pad_multiple);
  positive("seq_len", seq_len);
  positive("n_layer", n_layer);
  positive("n_head", n_head);
  positive("d_model", d_model);
  if (d_ff < 0) config_fail(doc, kSection, "d_ff", "must not be negative (0 = 4 * d_model)");
  // Below 2^31 each, so ff_width() and padded_vocab_size() cannot overflow.
  if (ff_width() > kMaxSize)
    config_fail(doc, kSection, d_ff > 0 ? "d_ff" : "d_model",
                "the MLP's width must be below 2^31, got " + std::to_string(ff_width()));
  if (padded_vocab_size() > kMaxSize)
    config_fail(doc, kSection, "vocab_pad_multiple",
                "padding the vocabulary of " + std::to_string(vocab_size) + " to a multiple of " +
                    std::to_string(vocab_pad_multiple) + " passes 2^31");
  // Each size fits, but their products must too: a bound on the whole model, in doubles.
  const double width = static_cast<double>(d_model);
  const double blocks = static_cast<double>(n_layer) *
                        (4 * width * width + 2 * width * static_cast<double>(ff_width()));
  const double embeddings = static_cast<double>(padded_vocab_size() + seq_len) * width;
  const double parameters = blocks + embeddings;
  // Named after what makes most of it: the layer count, the width, or the vocabulary.
  const char* largest = embeddings > blocks                               ? "vocab_size"
                        : static_cast<double>(n_layer) > width * width ? "n_layer"
                                                                         : "d_model";
  if (parameters > 1e13)
    config_fail(doc, kSection, largest,
                std::to_string(n_layer) + " layers of width " + std::to_string(d_model) +
                    " (MLP " + std::to_string(ff_width()) + ") and a vocabulary of " +
                    std::to_string(vocab_size) + " make about " +
                    std::to_string(static_cast<long long>(parameters / 1e9)) +
                    " billion parameters, beyond any run this framework can hold");
  if (d_model % n_head != 0)
    config_fail(doc, kSection, "n_head",
                "n_head (" + std::to_string(n_head) + ") does not divide model.d_model (" +
                    std::to_string(d_model) + ")");
  if (!(dropout >= 0 && dropout < 1)) config_fail(doc, kSection, "dropout", "must be in [0, 1)");
  // The keep test's resolution (kernels/dropout_math.h): a smaller p would drop nothing.
  if (dropout > 0 && dropout < 1.0 / 65536)
    config_fail(doc, kSection, "dropout", "must be 0 or at least 1/65536 (1.5e-5)");
  if (!(init_std > 0)) config_fail(doc, kSection, "init_std", "must be positive");
  model_family(family).validate(*this, doc);
  if (!LayerRegistry::instance().has(block))
    config_fail(doc, kSection, "block", LayerRegistry::instance().why_unknown(block));
}

}  // namespace ternion
