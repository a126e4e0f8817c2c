#include "training/hf_import.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/safetensors.h"
#include "training/hf_interop.h"

namespace ternion {

void import_hf_weights(const ModelConfig& config, const std::string& dir,
                       const std::vector<Parameter*>& params) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  if (std::filesystem::exists(config_path)) {
    std::ifstream in(config_path, std::ios::binary);
    std::ostringstream text;
    if (in.is_open()) text << in.rdbuf();
    TN_CHECK_AS(CheckpointError, in.is_open() && !in.bad(), "model.init_from '", dir,
                "': cannot read '", config_path, "'");
    try {
      hf_mapping(config).check_config(config, text.str(), config_path);
    } catch (const CheckpointError& e) {
      TN_THROW(CheckpointError, "model.init_from '", dir, "': ", e.what());
    }
  }
  const std::string path = (std::filesystem::path(dir) / "model.safetensors").string();
  std::map<std::string, Tensor> whole;
  try {
    const SafetensorsFile file = SafetensorsFile::open(path);
    std::vector<std::pair<std::string, Tensor>> hf;
    for (const SafetensorsEntry& entry : file.entries())
      hf.emplace_back(entry.name, file.read(entry.name));
    whole = hf_mapping(config).from_hf(config, hf);
  } catch (const Error& e) {
    if (!e.is_user_error()) throw;
    TN_THROW(CheckpointError, "model.init_from '", dir, "': ", e.what());
  }
  for (Parameter* p : params) {
    const Tensor& full = whole.at(p->name);
    p->value.copy_from(p->is_sharded() ? full.slice(p->shard_dim, p->shard_offset,
                                                    p->value.size(p->shard_dim))
                                       : full);
  }
}

}  // namespace ternion
