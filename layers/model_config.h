// The `model:` config section: a decoder of one registered family (layers/model_family.h).
//   gpt2   pre-LayerNorm blocks of causal self-attention and a GELU MLP, learned positions, a
//          final LayerNorm, an LM head tied to the token embedding
//   llama  pre-RMSNorm blocks of grouped-query attention with rotary positions and a SwiGLU
//          MLP, no biases, a final RMSNorm, an LM head untied by default
#pragma once

#include <cstdint>
#include <string>

#include "framework/config_reader.h"

namespace ternion {

struct ModelConfig {
  std::string family = "gpt2";           // registered model family (layers/model_family.h)
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
  std::string init_from;                 // a Hugging Face directory of the family to start from
  // llama only (each refused in a gpt2 config that sets it):
  std::int64_t n_kv_head = 0;            // key/value heads (grouped-query); 0 = n_head
  double rope_theta = 10000.0;           // rotary embedding base
  // Llama 3.1's rotary frequency scaling (kernels/rotary_qkv_math.h); factor 0 = none.
  double rope_scaling_factor = 0.0;
  double rope_scaling_low_freq_factor = 1.0;
  double rope_scaling_high_freq_factor = 4.0;
  std::int64_t rope_scaling_original_context = 8192;
  std::int64_t max_context = 0;          // the longest context it is made for; 0 = seq_len
  double norm_eps = 1e-5;                // RMSNorm epsilon
  bool tie_embeddings = false;           // the LM head shares the token embedding

  template <class V>
  void visit(V& v) {
    v("family", family, "model family: gpt2 or llama");
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
      "start from a Hugging Face directory of the family (config.json, model.safetensors or "
      "its indexed shards, f32/bf16/f16; ternion-export writes one)");
    v("n_kv_head", n_kv_head, "llama: key/value heads, dividing n_head (0 = n_head)");
    v("rope_theta", rope_theta, "llama: base of the rotary position embedding");
    v("rope_scaling_factor", rope_scaling_factor,
      "llama: Llama 3.1's rotary frequency scaling factor (transformers' rope_type llama3; "
      "0 = none)");
    v("rope_scaling_low_freq_factor", rope_scaling_low_freq_factor,
      "llama: with rope_scaling_factor, wavelengths above original_context / this are scaled");
    v("rope_scaling_high_freq_factor", rope_scaling_high_freq_factor,
      "llama: with rope_scaling_factor, wavelengths below original_context / this are kept");
    v("rope_scaling_original_context", rope_scaling_original_context,
      "llama: with rope_scaling_factor, the context the model was first trained at");
    v("max_context", max_context,
      "llama: the longest context the model is made for, at least seq_len (0 = seq_len); "
      "ternion-export writes it as max_position_embeddings");
    v("norm_eps", norm_eps, "llama: RMSNorm epsilon");
    v("tie_embeddings", tie_embeddings, "llama: the LM head shares the token embedding's weight");
  }

  std::int64_t padded_vocab_size() const {
    return (vocab_size + vocab_pad_multiple - 1) / vocab_pad_multiple * vocab_pad_multiple;
  }
  std::int64_t ff_width() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  std::int64_t head_size() const { return d_model / n_head; }
  std::int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  std::int64_t context_made_for() const { return max_context > 0 ? max_context : seq_len; }

  void validate(const ConfigDocument& doc) const;
};

}  // namespace ternion
