#include "training/train_cli.h"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "framework/logging.h"
#include "kernels/threads.h"
#include "training/trainer.h"

namespace ternion {

namespace {

constexpr const char* kUsage =
    "usage: ternion-train --config FILE [--set section.key=value ...] [--dry-run]\n"
    "       ternion-train --print-config\n"
    "  --config FILE     YAML config (sections model, parallel, training, optimizer, data, "
    "logging)\n"
    "  --set S.K=V       override one key, e.g. --set training.steps=10 (repeatable)\n"
    "  --dry-run         validate the config and data, build the model, print its size, exit\n"
    "  --print-config    print every key with its default and meaning\n";

struct CliOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  bool dry_run = false;
  bool print_config = false;
  bool help = false;
};

CliOptions parse_args(int argc, char** argv) {
  CliOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      TN_CHECK_AS(UsageError, i + 1 < argc, arg, " needs a value");
      return argv[++i];
    };
    if (arg == "--config") {
      options.config_path = value();
    } else if (arg.rfind("--config=", 0) == 0) {
      options.config_path = arg.substr(9);
    } else if (arg == "--set") {
      options.overrides.push_back(value());
    } else if (arg.rfind("--set=", 0) == 0) {
      options.overrides.push_back(arg.substr(6));
    } else if (arg == "--dry-run") {
      options.dry_run = true;
    } else if (arg == "--print-config") {
      options.print_config = true;
    } else if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else {
      TN_THROW(UsageError, "unknown argument '", arg, "'");
    }
  }
  if (!options.help && !options.print_config)
    TN_CHECK_AS(UsageError, !options.config_path.empty(), "--config FILE is required");
  return options;
}

std::string human_count(double n) {
  char out[32];
  if (n >= 1e9) std::snprintf(out, sizeof out, "%.2fB", n / 1e9);
  else if (n >= 1e6) std::snprintf(out, sizeof out, "%.2fM", n / 1e6);
  else if (n >= 1e3) std::snprintf(out, sizeof out, "%.1fK", n / 1e3);
  else std::snprintf(out, sizeof out, "%.0f", n);
  return out;
}

int run(const CliOptions& options) {
  if (options.help) {
    std::cout << kUsage;
    return 0;
  }
  if (options.print_config) {
    print_config_schema(std::cout);
    return 0;
  }
  const TrainConfig config = TrainConfig::load(options.config_path, options.overrides);
  if (config.training.threads > 0) set_num_threads(static_cast<int>(config.training.threads));

  Trainer trainer(config);
  const ModelConfig& m = config.model;
  const std::int64_t params = count_elements(trainer.model().parameters());
  log_info("ternion: GPT ", m.n_layer, " layers x ", m.d_model, " wide, ", m.n_head, " heads, vocab ",
           m.vocab_size, " (padded ", m.padded_vocab_size(), "), context ", m.seq_len, ": ",
           human_count(static_cast<double>(params)), " parameters (", params, ")");
  log_info("ternion: ", config.training.steps, " steps of ", config.training.global_batch_size,
           " sequences (", config.micro_batches_per_step(), " micro-batches of ",
           config.parallel.micro_batch_size, "), ", num_threads(), " threads, optimizer ",
           config.optimizer.type, ", parameters ", human_count(params * 4.0), "B, optimizer state ",
           human_count(static_cast<double>(trainer.optimizer_state_bytes())), "B");
  if (options.dry_run) {
    log_info("ternion: dry run: config and data are valid");
    return 0;
  }
  trainer.run();
  if (config.training.sample_tokens > 0) {
    SampleOptions sample;
    sample.prompt = config.training.sample_prompt;
    sample.max_tokens = config.training.sample_tokens;
    sample.temperature = config.training.sample_temperature;
    sample.top_k = config.training.sample_top_k;
    sample.seed = static_cast<std::uint64_t>(config.training.seed);
    log_info("ternion: sample (temperature ", sample.temperature, ", top-k ", sample.top_k,
             "):\n", sample.prompt, trainer.generate(sample));
  }
  return 0;
}

}  // namespace

int train_main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ternion-train: error: %s\n%s", e.what(), "run 'ternion-train --help' for usage\n");
    return 2;
  } catch (const Error& e) {
    if (e.is_user_error()) {
      std::fprintf(stderr, "ternion-train: error: %s\n", e.what());
    } else {
      std::fprintf(stderr, "ternion-train: internal error: %s\n", e.what());
    }
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ternion-train: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion-train: internal error: %s\n", e.what());
    return 1;
  }
}

}  // namespace ternion
