#include "training/generate_cli.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "framework/output_path.h"
#include "framework/strict_json.h"
#include "layers/kv_cache_decoder.h"
#include "training/checkpoint.h"
#include "training/cli_option_values.h"
#include "training/trainer.h"

namespace ternion {

namespace {

constexpr const char* kUsage =
    "usage: ternion-generate --checkpoint DIR --prompt TEXT [--max-tokens N] [--temperature T]\n"
    "                        [--top-k K] [--top-p P] [--seed S] [--context N] [--ignore-eos]\n"
    "                        [--logits FILE]\n"
    "  --checkpoint DIR   a checkpoint (checkpoint.save_dir/step_NNNNNNN), or a save_dir: its\n"
    "                     latest checkpoint\n"
    "  --prompt TEXT      the text the sample continues\n"
    "  --max-tokens N     tokens to generate (default 200); fewer where the tokenizer's\n"
    "                     end-of-text token (<|endoftext|>) comes first, which ends the text\n"
    "  --ignore-eos       go on past the end-of-text token, printing it\n"
    "  --temperature T    (default: the checkpoint's training.sample_temperature)\n"
    "  --top-k K          0 = the whole vocabulary (default: its training.sample_top_k)\n"
    "  --top-p P          in (0, 1]: then the fewest likeliest tokens whose probability reaches\n"
    "                     P (default: its training.sample_top_p)\n"
    "  --seed S           (default: its training.seed, so the same prompt and length give the\n"
    "                     sample the training run printed)\n"
    "  --context N        tokens each new one attends to; past them the window slides (default:\n"
    "                     the context the model is made for, model.max_context or seq_len)\n"
    "  --logits FILE      also write the model's logits at each of the prompt's tokens to FILE:\n"
    "                     a JSON array of one row of vocab_size numbers per token (compare them\n"
    "                     with another implementation; --max-tokens 0 for these alone)\n";

// What the command line gave; the checkpoint's config fills what it did not.
struct Options {
  bool help = false;
  std::string checkpoint;
  SampleOptions sample;
  std::optional<double> temperature;
  std::optional<std::int64_t> top_k;
  std::optional<double> top_p;
  std::optional<std::uint64_t> seed;
  std::optional<std::int64_t> context;
  bool ignore_eos = false;
  std::string logits_path;
};

Options parse(int argc, char** argv) {
  Options o;
  o.sample.max_tokens = 200;
  bool have_prompt = false;
  CliOptionValues values({"--checkpoint", "--prompt", "--max-tokens", "--temperature", "--top-k",
                          "--top-p", "--seed", "--context", "--logits"});
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() { return values.take(argc, argv, i); };
    auto number = [&](const std::string& text) { return cli_number(arg, text); };
    auto integer = [&](const std::string& text) { return cli_integer(arg, text); };
    if (arg == "--checkpoint") o.checkpoint = value();
    else if (arg == "--prompt") { o.sample.prompt = value(); have_prompt = true; }
    else if (arg == "--max-tokens") o.sample.max_tokens = integer(value());
    else if (arg == "--temperature") o.temperature = number(value());
    else if (arg == "--top-k") o.top_k = integer(value());
    else if (arg == "--top-p")
      o.top_p = number(value());
    else if (arg == "--seed") {
      const std::int64_t seed = integer(value());
      TN_CHECK_AS(UsageError, seed >= 0, "--seed must not be negative, got ", seed);
      o.seed = static_cast<std::uint64_t>(seed);
    } else if (arg == "--context") {
      o.context = integer(value());
      TN_CHECK_AS(UsageError, *o.context >= 1, "--context must be at least 1, got ", *o.context);
    } else if (arg == "--logits") {
      o.logits_path = value();
      TN_CHECK_AS(UsageError, !o.logits_path.empty(), "--logits needs a file name");
    } else if (arg == "--ignore-eos") {
      o.ignore_eos = true;
    } else if (arg == "--help" || arg == "-h")
      o.help = true;
    else TN_THROW(UsageError, "unknown argument '", arg, "'");
  }
  if (o.help) return o;
  TN_CHECK_AS(UsageError, !o.checkpoint.empty(), "--checkpoint DIR is required");
  TN_CHECK_AS(UsageError, have_prompt, "--prompt TEXT is required");
  TN_CHECK_AS(UsageError, o.sample.max_tokens >= 0, "--max-tokens must not be negative");
  TN_CHECK_AS(UsageError, !o.temperature || (*o.temperature > 0 && std::isfinite(*o.temperature)),
              "--temperature must be a positive finite number");
  TN_CHECK_AS(UsageError, !o.top_k || *o.top_k >= 0, "--top-k must not be negative");
  TN_CHECK_AS(UsageError, !o.top_p || (*o.top_p > 0 && *o.top_p <= 1), "--top-p must be in (0, 1]");
  return o;
}

// The prompt's logits [T, vocab_size] (the padding rows dropped) as JSON rows, written to a
// temporary name and renamed, so FILE is whole or absent.
// `checkpoint_files`: what the model was read from, which FILE must not be; `context_source`:
// what set sample.context (--context, or the model's key).
void write_prompt_logits(GptModel& model, const SampleOptions& sample, const std::string& path,
                         const std::vector<std::string>& checkpoint_files,
                         const std::string& context_source) {
  const std::string problem =
      sample.tokenizer.prompt_problem(sample.prompt, model.config().vocab_size);
  TN_CHECK_AS(UsageError, problem.empty(), "--prompt: ", problem);
  const std::vector<std::int32_t> ids = sample.tokenizer.encode_prompt(sample.prompt);
  const auto seq = static_cast<std::int64_t>(ids.size());
  TN_CHECK_AS(UsageError, seq >= 1 && seq <= sample.context, "--logits: the prompt has ", seq,
              " tokens; the logits take 1 to ", sample.context, " (", context_source, ")");
  Tensor tokens = Tensor::empty({1, seq}, DType::I32);
  std::copy(ids.begin(), ids.end(), tokens.data<std::int32_t>());
  MicroBatchInfo info;
  info.training = false;
  ActivationContext ctx(info);
  const std::vector<float> logits = model.logits(tokens, ctx).to_vector();
  const std::int64_t padded = model.config().padded_vocab_size();
  const std::string why_not = why_not_replaceable(path, checkpoint_files);
  TN_CHECK_AS(DataError, why_not.empty(), "--logits: ", why_not);
  const std::int64_t vocab = model.config().vocab_size;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    TN_CHECK_AS(DataError, out.good(), "--logits: cannot write '", tmp, "'");
    Json rows = Json::array();
    for (std::int64_t t = 0; t < seq; ++t) {
      const auto row = logits.begin() + t * padded;
      rows.push_back(std::vector<float>(row, row + vocab));
    }
    out << json_text(rows) << "\n";
    out.flush();
    TN_CHECK_AS(DataError, out.good(), "--logits: cannot write '", tmp, "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    TN_THROW(DataError, "--logits: cannot rename '", tmp, "' to '", path, "': ", ec.message());
  }
}

int run(Options o) {
  if (o.help) {
    std::cout << kUsage;
    flush_standard_output();
    return 0;
  }
  TrainConfig config;
  std::unique_ptr<GptModel> model = load_model_from_checkpoint(o.checkpoint, &config);
  o.sample.tokenizer = checkpoint_tokenizer(o.checkpoint, config);
  o.sample.stop_token = o.sample.tokenizer.end_of_text_id();
  o.sample.temperature = o.temperature.value_or(config.training.sample_temperature);
  o.sample.top_k = o.top_k.value_or(config.training.sample_top_k);
  o.sample.top_p = o.top_p.value_or(config.training.sample_top_p);
  o.sample.seed = o.seed.value_or(static_cast<std::uint64_t>(config.training.seed));
  if (o.ignore_eos) o.sample.stop_token = -1;
  const std::int64_t made_for = config.model.context_made_for();
  const std::string made_for_key =
      config.model.max_context > 0 ? "model.max_context" : "model.seq_len";
  TN_CHECK_AS(UsageError, o.context.value_or(made_for) <= made_for, "--context ", *o.context,
              " is longer than the ", made_for, " tokens the model is made for (", made_for_key,
              ")");
  o.sample.context = o.context.value_or(made_for);
  if (!o.logits_path.empty())
    write_prompt_logits(*model, o.sample, o.logits_path, checkpoint_files(o.checkpoint),
                        o.context ? "--context" : made_for_key);
  // One rank: the KV cache where the decoder knows the model's keys and values; otherwise (a
  // registered custom block) each token reruns its window.
  const std::string text =
      KvCacheDecoder::supports(config.model)
          ? generate_text_cached(config.model, *model, o.sample)
          : generate_text(config.model, o.sample, 1, [&](const Tensor& tokens) {
              MicroBatchInfo info;
              info.training = false;
              ActivationContext ctx(info);
              return model->logits(tokens, ctx);
            });
  std::cout << o.sample.prompt << text << '\n';
  flush_standard_output();
  return 0;
}

}  // namespace

int generate_main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ternion-generate: error: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "ternion-generate: %serror: %s\n", e.is_user_error() ? "" : "internal ",
                 e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion-generate: internal error: %s\n", e.what());
    return 1;
  }
}

}  // namespace ternion
