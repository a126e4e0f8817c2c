// The `ternion-export` command line:
//   ternion-export --checkpoint DIR --output DIR
// writes OUTPUT/model.safetensors with Hugging Face's parameter names and layouts for the
// checkpoint's model family and OUTPUT/config.json, which transformers' GPT2LMHeadModel or
// LlamaForCausalLM .from_pretrained reads (training/hf_interop.h has the mappings). Both are
// written under temporary names and renamed.
#pragma once

namespace ternion {

int export_main(int argc, char** argv);

}  // namespace ternion
