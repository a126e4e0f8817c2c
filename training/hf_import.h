// model.init_from: a Hugging Face directory (model.safetensors, and config.json where present)
// of the config's family into this rank's parameters, each its shard of the whole tensor.
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
