#include "training/export_cli.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/output_path.h"
#include "framework/safetensors.h"
#include "training/checkpoint.h"
#include "training/cli_option_values.h"
#include "training/hf_interop.h"

namespace ternion {

namespace {

constexpr const char* kUsage = "usage: ternion-export --checkpoint DIR --output DIR\n";

// Removes the temporary files of an export that failed part-way, so that a failed export
// leaves OUTPUT as it found it. After the renames none of them exists any more.
class TemporaryFiles {
 public:
  explicit TemporaryFiles(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  TemporaryFiles(const TemporaryFiles&) = delete;
  TemporaryFiles& operator=(const TemporaryFiles&) = delete;
  ~TemporaryFiles() {
    for (const std::string& path : paths_) {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  }

 private:
  std::vector<std::string> paths_;
};

// The output folder an export made: removed again (empty, once the temporaries are gone) when
// the export fails, so that a failure leaves no folder behind.
class OutputFolder {
 public:
  OutputFolder(std::string path, bool made) : path_(std::move(path)), made_(made) {}
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  ~OutputFolder() {
    std::error_code ignored;
    if (made_) std::filesystem::remove(path_, ignored);  // only while empty
  }
  void keep() { made_ = false; }

 private:
  std::string path_;
  bool made_;
};

int run(int argc, char** argv) {
  std::string checkpoint, output;
  CliOptionValues values({"--checkpoint", "--output"});
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() { return values.take(argc, argv, i); };
    if (arg == "--checkpoint") checkpoint = value();
    else if (arg == "--output") output = value();
    else if (arg == "--help" || arg == "-h") { std::cout << kUsage; return 0; }
    else TN_THROW(UsageError, "unknown argument '", arg, "'");
  }
  TN_CHECK_AS(UsageError, !checkpoint.empty(), "--checkpoint DIR is required");
  TN_CHECK_AS(UsageError, !output.empty(), "--output DIR is required");

  // A registered custom block would load, then fail in the mapping; an unregistered one would
  // fail as an unknown type: either way, only the families' built-in block has a Hugging Face
  // counterpart.
  ModelConfig family;
  family.family = checkpoint_model_key(checkpoint, "family", family.family);
  if (const std::string block = checkpoint_block_type(checkpoint); block != ModelConfig().block)
    TN_THROW(CheckpointError, "cannot export '", checkpoint, "': its block type '", block,
             "' has no Hugging Face ", hf_mapping(family).family_name,
             " counterpart (only the built-in '", ModelConfig().block, "' block exports)");
  TrainConfig config;
  std::unique_ptr<GptModel> model = load_model_from_checkpoint(checkpoint, &config);
  std::map<std::string, Tensor> params;
  for (const Parameter* p : model->parameters()) params[p->name] = p->value;
  const HfMapping& mapping = hf_mapping(config.model);
  const auto hf = mapping.to_hf(config.model, params);

  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string weights = (fs::path(output) / "model.safetensors").string();
  const std::string json = (fs::path(output) / "config.json").string();
  // A BPE run's tokenizer goes along, so the folder loads with its tokenizer too.
  const Tokenizer tokenizer = checkpoint_tokenizer(checkpoint, config);
  const std::string tokenizer_json = (fs::path(output) / "tokenizer.json").string();
  const std::string tokenizer_config = (fs::path(output) / "tokenizer_config.json").string();
  std::vector<std::string> written{weights, json};
  if (tokenizer.bpe() != nullptr) {
    written.push_back(tokenizer_json);
    written.push_back(tokenizer_config);
  }
  // Every file is checked before any is written: a rename that fails part-way would leave the
  // folder with this export's weights beside an earlier export's config.
  const std::vector<std::string> inputs = checkpoint_files(checkpoint);
  for (const std::string& path : written) {
    const std::string why_not = why_not_replaceable(path, inputs);
    TN_CHECK_AS(CheckpointError, why_not.empty(), "--output: ", why_not);
  }
  const bool made_output = !fs::exists(output, ec);
  fs::create_directories(output, ec);
  TN_CHECK_AS(CheckpointError, !ec, "cannot create '", output, "': ", ec.message());
  OutputFolder folder(output, made_output);
  const TemporaryFiles temporaries(
      {weights + ".tmp", json + ".tmp", tokenizer_json + ".tmp", tokenizer_config + ".tmp"});
  write_safetensors(weights + ".tmp", hf, {{"format", "pt"}});  // checked and fsynced
  auto write_text = [](const std::string& path, const std::string& text) {
    std::ofstream out(path + ".tmp", std::ios::binary);
    out << text;
    out.close();
    TN_CHECK_AS(CheckpointError, !out.fail(), "cannot write '", path, ".tmp'");
  };
  write_text(json, hf_config_json(config.model, tokenizer));
  if (tokenizer.bpe() != nullptr) {
    write_text(tokenizer_json, tokenizer.bpe()->to_json());
    write_text(tokenizer_config, hf_tokenizer_config_json(config.model, tokenizer));
  }
  for (const std::string& path : written) {
    fs::rename(path + ".tmp", path, ec);
    TN_CHECK_AS(CheckpointError, !ec, "cannot rename '", path, ".tmp' to '", path, "': ",
                ec.message());
  }
  // An earlier export's tokenizer would otherwise load beside a bytes model.
  if (tokenizer.bpe() == nullptr)
    for (const std::string& path : {tokenizer_json, tokenizer_config}) {
      fs::remove(path, ec);
      TN_CHECK_AS(CheckpointError, !ec, "cannot remove the earlier export's '", path,
                  "': ", ec.message());
    }
  folder.keep();
  std::printf("wrote %s (%zu tensors) and %s%s\n", weights.c_str(), hf.size(), json.c_str(),
              tokenizer.bpe() != nullptr
                  ? (" and " + tokenizer_json + " with " + tokenizer_config).c_str()
                  : "");
  return 0;
}

}  // namespace

int export_main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ternion-export: error: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "ternion-export: %serror: %s\n", e.is_user_error() ? "" : "internal ",
                 e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion-export: internal error: %s\n", e.what());
    return 1;
  }
}

}  // namespace ternion
