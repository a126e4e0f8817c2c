// Export to Hugging Face transformers' GPT2LMHeadModel: parameter names and layouts, and its
// config.json. Pure mappings (no files): the export program writes the result with
// write_safetensors.
//
// Ours (layers/*.cpp)                        Hugging Face (Conv1D weights are [in, out], y = x W)
//   wte [padded_vocab, C]                    transformer.wte.weight [vocab, C]  (padding rows
//   dropped) wpe [seq_len, C]                         transformer.wpe.weight [seq_len, C]
//   h.i.ln_1.{weight,bias} [C]               transformer.h.i.ln_1.{weight,bias}
//   h.i.attn.qkv.weight [3C, C]              transformer.h.i.attn.c_attn.weight [C, 3C]
//     rows grouped per head [q_h | k_h | v_h]   columns [all q | all k | all v], head h's q at
//     (kernels/attention.h)                      columns h*hs.., its k at C + h*hs.., v at 2C +
//     h*hs..
//   h.i.attn.qkv.bias [3C] (grouped per head) transformer.h.i.attn.c_attn.bias [3C] (q | k | v)
//   h.i.attn.proj.weight [C, C]              transformer.h.i.attn.c_proj.weight [C, C] (transposed)
//   h.i.attn.proj.bias [C]                   transformer.h.i.attn.c_proj.bias
//   h.i.ln_2.{weight,bias}                   transformer.h.i.ln_2.{weight,bias}
//   h.i.mlp.fc.weight [F, C]                 transformer.h.i.mlp.c_fc.weight [C, F]
//   h.i.mlp.fc.bias [F]                      transformer.h.i.mlp.c_fc.bias
//   h.i.mlp.proj.weight [C, F]               transformer.h.i.mlp.c_proj.weight [F, C]
//   h.i.mlp.proj.bias [C]                    transformer.h.i.mlp.c_proj.bias
//   ln_f.{weight,bias}                       transformer.ln_f.{weight,bias}
// lm_head.weight is tied to transformer.wte.weight and omitted (HF re-ties it on load).
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
// is missing, has the wrong shape, or is one the mapping does not know (a block type other
// than GPT-2's "transformer" cannot be exported).
std::vector<std::pair<std::string, Tensor>> to_hf_gpt2(const ModelConfig& config,
                                                       const std::map<std::string, Tensor>& params);
// The inverse: GPT-2's tensors (names and layouts as to_hf_gpt2 writes them, as
// transformers saves them) as our whole parameters; the embedding's padding rows are zero.
// CheckpointError naming the tensor for a missing one, a wrong shape, or one without a place.
std::map<std::string, Tensor> from_hf_gpt2(const ModelConfig& config,
                                           const std::vector<std::pair<std::string, Tensor>>& hf);

// config.json for GPT2LMHeadModel with `config`'s sizes (vocab_size unpadded).
std::string hf_gpt2_config_json(const ModelConfig& config);

// Checks a GPT-2 config.json (its text; `path` names it in messages) against `config` before
// its weights are imported. The weights' shapes cannot show n_head (a [C, 3C] c_attn splits
// into any number of heads), so without this a model of another head count would load and
// compute a different function; the other sizes are checked too, so that a mismatch names the
// config key rather than a tensor. Keys the file leaves out are not checked (transformers
// would take its defaults, which need not be what the writer meant); n_inner null means
// 4 * n_embd. CheckpointError naming the file, the key and both values, or a file that is not
// a JSON object.
void check_hf_gpt2_config(const ModelConfig& config, const std::string& json,
                          const std::string& path);

}  // namespace ternion
