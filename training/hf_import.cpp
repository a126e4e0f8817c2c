#include "training/hf_import.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "framework/bfloat16.h"
#include "framework/float16.h"
#include "framework/read_file.h"
#include "framework/safetensors.h"
#include "training/checkpoint.h"
#include "training/hf_interop.h"

namespace ternion {

namespace {

std::string read_text(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = read_whole_file(path, why);
  TN_CHECK_AS(CheckpointError, text.has_value(), "cannot read '", path, "': ", why);
  return *text;
}

// The directory's weight files: model.safetensors, or the shards its index names (Hugging Face
// splits larger models: model.safetensors.index.json maps each tensor to its file).
std::vector<std::string> weight_files(const std::filesystem::path& dir) {
  // One file where there is one, else the index, in transformers' order.
  const std::filesystem::path single = dir / "model.safetensors";
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (checkpoint_path_exists(single) || !checkpoint_path_exists(index)) return {single.string()};
  const Json root = read_hf_json_object(read_text(index.string()), index.string());
  const auto map = root.find("weight_map");
  TN_CHECK_AS(CheckpointError, map != root.end() && map->is_object() && !map->empty(), "'",
              index.string(), "' has no \"weight_map\" of tensor names to files");
  std::set<std::string> files;
  for (const auto& [tensor, value] : map->items()) {
    const std::string file = value.is_string() ? value.get<std::string>() : "";
    TN_CHECK_AS(CheckpointError,
                !file.empty() && std::filesystem::path(file).filename().string() == file,
                "'", index.string(), "': tensor '", tensor, "' maps to '", file,
                "', not a file name in the directory");
    files.insert(file);
  }
  std::vector<std::string> paths;
  for (const std::string& file : files) paths.push_back((dir / file).string());
  return paths;
}

// Half-precision checkpoints (bf16 or f16, as released models mostly are) widen to f32
// exactly; the mappings and the parameters take f32.
Tensor widened(const Tensor& t) {
  if (t.dtype() != DType::BF16 && t.dtype() != DType::F16) return t;
  Tensor out = Tensor::empty(t.shape());
  const auto* in = static_cast<const std::uint16_t*>(t.raw_data());
  float* o = out.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    o[i] = t.dtype() == DType::BF16 ? bf16_to_float(BFloat16{in[i]}) : f16_to_float(in[i]);
  return out;
}

}  // namespace

void import_hf_weights(const ModelConfig& config, const std::string& dir,
                       const std::vector<Parameter*>& params) {
  std::map<std::string, Tensor> whole;
  try {
    const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
    if (checkpoint_path_exists(config_path))
      hf_mapping(config).check_config(config, read_text(config_path), config_path);
    std::vector<std::pair<std::string, Tensor>> hf;
    std::set<std::string> names;
    for (const std::string& path : weight_files(dir)) {
      const SafetensorsFile file = SafetensorsFile::open(path);
      for (const SafetensorsEntry& entry : file.entries()) {
        TN_CHECK_AS(CheckpointError, names.insert(entry.name).second, "tensor '", entry.name,
                    "' is in two weight files (the second: '", path, "')");
        hf.emplace_back(entry.name, widened(file.read(entry.name)));
      }
    }
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
