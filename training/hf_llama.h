// Hugging Face transformers' LlamaForCausalLM: parameter names and layouts, and its
// config.json. Pure mappings (no files), as GPT-2's in training/hf_export.h.
//
// C = d_model, H = n_head, G = kv_heads(), hs = C / H, r = H / G, F = ff_width(),
// V = padded_vocab_size(). Every HF weight is nn.Linear's [out, in], as ours; no biases.
//
// Ours (layers/*.cpp)                        Hugging Face
//   wte [V, C]                               model.embed_tokens.weight [vocab, C] (padding dropped)
//   h.i.attn_norm.weight [C]                 model.layers.i.input_layernorm.weight
//   h.i.attn.qkv.weight [(H + 2G) hs, C]     model.layers.i.self_attn.{q,k,v}_proj.weight
//     rows grouped per key/value group g:      q_proj [H hs, C], k_proj and v_proj [G hs, C]
//     [q of heads g r .. g r + r - 1 | k_g | v_g]   (so tensor parallelism splits whole groups)
//   h.i.attn.proj.weight [C, H hs]           model.layers.i.self_attn.o_proj.weight
//   h.i.mlp_norm.weight [C]                  model.layers.i.post_attention_layernorm.weight
//   h.i.mlp.gate_up.weight [2F, C]           model.layers.i.mlp.{gate,up}_proj.weight [F, C]
//     rows interleaved: 2j = gate j, 2j + 1 = up j (so a shard holds whole feature pairs)
//   h.i.mlp.down.weight [C, F]               model.layers.i.mlp.down_proj.weight
//   norm.weight [C]                          model.norm.weight
//   lm_head.weight [V, C] (untied only)      lm_head.weight [vocab, C]; absent when tied
// HF's rotary embedding rotates halves of each head (rotate_half), as ours does, so the q and
// k rows need no permutation (Meta's original checkpoints interleave pairs; HF's do not).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"
#include "layers/model_config.h"

namespace ternion {

// `params`: the whole (unsharded) parameters by our names, CPU, any dtype. Returns HF's names
// and layouts (fresh contiguous tensors, in HF's module order). CheckpointError if a parameter
// is missing, has the wrong shape, or is one the mapping does not know.
std::vector<std::pair<std::string, Tensor>> to_hf_llama(
    const ModelConfig& config, const std::map<std::string, Tensor>& params);
// The inverse: Llama's f32 tensors as transformers saves them, as our whole parameters; the
// embedding's padding rows are zero. With model.tie_embeddings a stored lm_head.weight must
// equal embed_tokens (some writers store the tied head). Old transformers' saved
// rotary_emb.inv_freq buffers are skipped. CheckpointError naming the tensor for a missing
// one, a wrong shape or dtype, or one without a place.
std::map<std::string, Tensor> from_hf_llama(const ModelConfig& config,
                                            const std::vector<std::pair<std::string, Tensor>>& hf);

// config.json for LlamaForCausalLM with `config`'s sizes (vocab_size unpadded), in the layout
// transformers 4.x writes (top-level rope_theta; rope_scaling of rope_type "llama3" where the
// model scales its rotary frequencies), which 5.x reads too.
std::string hf_llama_config_json(const ModelConfig& config);

// Checks a Llama config.json (its text; `path` names it in messages) against `config` before
// its weights are imported. The weights' shapes cannot show n_head (q_proj is [C, C] for any
// head count) nor rope_theta and rms_norm_eps, so without this another model would load and
// compute a different function. Checked: model_type, every size, rope_theta (4.x: top level;
// 5.x: in rope_parameters), rms_norm_eps (relative tolerance), tie_word_embeddings, and the
// rotary embedding's kind: plain (rope_type "default") or Llama 3's scaling ("llama3", every
// field against model.rope_scaling_*; given where ours scales, absent where it does not);
// max_position_embeddings only bounds model.max_context (or seq_len), as rotary positions are
// not weights. A key the file leaves out is read as transformers' LlamaConfig reads it
// (rope_theta 10000, rms_norm_eps 1e-6, untied, num_key_value_heads = num_attention_heads).
// CheckpointError naming the file, the key and both values, or a file that is not a JSON object.
void check_hf_llama_config(const ModelConfig& config, const std::string& json,
                           const std::string& path);

}  // namespace ternion
