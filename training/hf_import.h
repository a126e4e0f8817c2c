// model.init_from: a Hugging Face directory of the config's family (config.json where present;
// model.safetensors, or the shards model.safetensors.index.json names; f32, bf16 or f16,
// widened to f32) into this rank's parameters, each its shard of the whole tensor.
#pragma once

#include <string>
#include <vector>

#include "framework/parameter.h"
#include "layers/model_config.h"

namespace ternion {

// CheckpointError naming the directory and what is wrong: an unreadable or mismatched
// config.json (another family or shape), a missing or misshapen tensor.
void import_hf_weights(const ModelConfig& config, const std::string& dir,
                       const std::vector<Parameter*>& params);

}  // namespace ternion
