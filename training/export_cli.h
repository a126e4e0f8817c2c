// The `ternion-export` command line:
//   ternion-export --checkpoint DIR --output DIR
// writes OUTPUT/model.safetensors with GPT-2's parameter names and layouts and
// OUTPUT/config.json, which transformers' GPT2LMHeadModel.from_pretrained reads
// (training/hf_export.h has the mapping). Both are written under temporary names and renamed.
#pragma once

namespace ternion {

int export_main(int argc, char** argv);

}  // namespace ternion
