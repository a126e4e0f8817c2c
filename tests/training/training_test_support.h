// Shared by the training tests: a scratch directory with a small prepared corpus.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "data/builtin_corpus.h"
#include "data/text_prepare.h"
#include "framework/strict_json.h"
#include "layers/model_config.h"
#include "training/hf_interop.h"

namespace ternion::testing_support {

// A fresh directory under the system temp dir, removed when the object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("ternion-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// train.bin / val.bin of the built-in corpus (about `bytes` bytes) in `dir`.
inline void prepare_builtin(const ScratchDir& dir, std::int64_t bytes = 200000) {
  prepare_text(builtin_corpus_text(bytes), dir.path().string(), {.val_fraction = 0.1});
}

// config.json text holding `json`'s keys and, where it leaves them out, the sizes of `config`
// as its family's export writes them: a test of other keys then meets no size of transformers'
// defaults. Text that is not a JSON object is returned as it is.
inline std::string sized_hf_config(const ModelConfig& config, const std::string& json) {
  Json given = Json::parse(json, nullptr, false);
  if (!given.is_object()) return json;
  const Json whole = Json::parse(hf_mapping(config).config_json(config));
  for (const char* key : {"n_head", "n_layer", "n_embd", "n_positions", "n_inner", "vocab_size",
                          "hidden_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "intermediate_size", "max_position_embeddings"})
    if (whole.contains(key) && !given.contains(key)) given[key] = whole[key];
  return given.dump();
}

}  // namespace ternion::testing_support
