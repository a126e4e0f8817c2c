// Shared by the training tests: a scratch directory with a small prepared corpus.
#pragma once

#include <filesystem>
#include <string>
#include <unistd.h>

#include "data/builtin_corpus.h"
#include "data/text_prepare.h"

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

}  // namespace ternion::testing_support
