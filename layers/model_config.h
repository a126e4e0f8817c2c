// The `model:` config section: a GPT-2-style decoder (pre-LayerNorm blocks of causal
// self-attention and a GELU MLP, a final LayerNorm, an LM head tied to the token embedding).
#pragma once

#include <cstdint>
#include <string>

#include "framework/config_reader.h"

namespace ternion {

struct ModelConfig {
  std::int64_t vocab_size = 256;         // real tokens (256 = bytes, as ternion-prepare makes)
  std::int64_t vocab_pad_multiple = 64;  // the embedding has vocab_size rounded up to this
  std::int64_t seq_len = 256;            // context length (learned positions)
  std::int64_t n_layer = 4;
  std::int64_t n_head = 4;
  std::int64_t d_model = 128;
  std::int64_t d_ff = 0;                 // MLP hidden width; 0 = 4 * d_model
  double dropout = 0.0;                  // on embeddings and on each residual branch
  double init_std = 0.02;                // weights ~ N(0, init_std); residual projections
                                         // are scaled by 1/sqrt(2 n_layer) (GPT-2)
  std::string block = "transformer";     // block type from the layer registry
  std::string init_from;                 // a Hugging Face GPT-2 directory to start from

  template <class V>
  void visit(V& v) {
    v("vocab_size", vocab_size, "vocabulary size (256 for byte-level data)");
    v("vocab_pad_multiple", vocab_pad_multiple, "pad the vocabulary to a multiple of this");
    v("seq_len", seq_len, "context length in tokens");
    v("n_layer", n_layer, "transformer blocks");
    v("n_head", n_head, "attention heads (must divide d_model)");
    v("d_model", d_model, "hidden width");
    v("d_ff", d_ff, "MLP width (0 = 4 * d_model)");
    v("dropout", dropout, "dropout probability on embeddings and residual branches");
    v("init_std", init_std, "standard deviation of the weight initialisation");
    v("block", block, "registered block type for every layer (see layers/layer_registry.h)");
    v("init_from", init_from,
      "start from a Hugging Face GPT-2 directory (model.safetensors; ternion-export writes one)");
  }

  std::int64_t padded_vocab_size() const {
    return (vocab_size + vocab_pad_multiple - 1) / vocab_pad_multiple * vocab_pad_multiple;
  }
  std::int64_t ff_width() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  std::int64_t head_size() const { return d_model / n_head; }

  void validate(const ConfigDocument& doc) const;
};

}  // namespace ternion
