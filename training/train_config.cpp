#include "training/train_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>

#include "data/byte_tokenizer.h"
#include "kernels/attention.h"
#include "kernels/linear.h"
#include "layers/model_facts.h"
#include "layers/model_family.h"
#include "layers/recompute.h"

namespace ternion {

namespace {

void validate_training(const ConfigDocument& doc, const TrainConfig& c, std::int64_t world_size,
                       TrainConfig::Purpose purpose) {
  const TrainingConfig& t = c.training;
  const char* kSection = "training";
  if (t.steps < 1) config_fail(doc, kSection, "steps", "must be at least 1");
  if (t.global_batch_size < 1)
    config_fail(doc, kSection, "global_batch_size", "must be at least 1");
  const std::int64_t per_pass = c.parallel.micro_batch_size * c.parallel.data_size(world_size);
  if (t.global_batch_size % per_pass != 0)
    config_fail(doc, kSection, "global_batch_size",
                std::to_string(t.global_batch_size) + " is not a multiple of " +
                    "parallel.micro_batch_size x data-parallel size = " + std::to_string(per_pass));
  if (t.seed < 0) config_fail(doc, kSection, "seed", "must not be negative");
  if (t.eval_interval < 0) config_fail(doc, kSection, "eval_interval", "must not be negative");
  if (t.eval_batches < 1) config_fail(doc, kSection, "eval_batches", "must be at least 1");
  if (t.threads < 0) config_fail(doc, kSection, "threads", "must not be negative");
  // More threads than cores only contend (and 64 under a memory limit hung in OpenBLAS's
  // buffer allocation): the machine that trains is the one that checks.
  if (const auto cores = static_cast<std::int64_t>(std::thread::hardware_concurrency());
      cores > 0 && t.threads > cores)
    config_fail(doc, kSection, "threads",
                std::to_string(t.threads) + " is more than this machine's " +
                    std::to_string(cores) + " cores");
  if (t.time_limit_minutes < 0)
    config_fail(doc, kSection, "time_limit_minutes", "must not be negative");
  // A run stopped at its limit goes on from the checkpoint it saves: without one, it is lost.
  if (t.time_limit_minutes > 0 && c.checkpoint.save_dir.empty())
    config_fail(doc, kSection, "time_limit_minutes", "needs checkpoint.save_dir");
  if (t.sample_tokens < 0) config_fail(doc, kSection, "sample_tokens", "must not be negative");
  if (t.sample_interval < 0)
    config_fail(doc, kSection, "sample_interval", "must not be negative");
  if (t.sample_interval > 0 && t.sample_tokens == 0)
    config_fail(doc, kSection, "sample_interval", "needs training.sample_tokens > 0");
  if (!(t.sample_temperature > 0) || !std::isfinite(t.sample_temperature))
    config_fail(doc, kSection, "sample_temperature", "must be a positive finite number");
  if (t.sample_top_k < 0) config_fail(doc, kSection, "sample_top_k", "must not be negative");
  if (!(t.sample_top_p > 0 && t.sample_top_p <= 1))
    config_fail(doc, kSection, "sample_top_p", "must be in (0, 1]");
  // A BPE tokenizer's prompt is checked once the tokenizer is read (open_tokenizer).
  if (t.sample_tokens > 0 && c.data.tokenizer.empty()) {
    const std::string problem = prompt_problem(t.sample_prompt, c.model.vocab_size);
    if (!problem.empty()) config_fail(doc, kSection, "sample_prompt", problem);
  }
  if (t.device != "cpu" && t.device != "cuda")
    config_fail(doc, kSection, "device", "must be cpu or cuda, got '" + t.device + "'");
  if (t.precision != "fp32" && t.precision != "bf16")
    config_fail(doc, kSection, "precision", "must be fp32 or bf16, got '" + t.precision + "'");
  AttentionKernel attention = AttentionKernel::automatic;
  if (!parse_attention_kernel(t.attention, attention))
    config_fail(doc, kSection, "attention",
                "must be auto, cudnn or cublas, got '" + t.attention + "'");
  if (attention == AttentionKernel::cudnn && t.device != "cuda")
    config_fail(doc, kSection, "attention",
                "cudnn is a CUDA kernel: it needs training.device: cuda");
  if (attention == AttentionKernel::cudnn && t.precision != "bf16")
    config_fail(doc, kSection, "attention",
                "cuDNN's fused attention runs bf16 only: it needs training.precision: bf16");
  GeluEpilogue gelu_epilogue = GeluEpilogue::check;
  if (!parse_gelu_epilogue(t.gelu_epilogue, gelu_epilogue))
    config_fail(doc, kSection, "gelu_epilogue",
                "must be check, on or off, got '" + t.gelu_epilogue + "'");
  Recompute recompute = Recompute::none;
  if (!parse_recompute(t.recompute, recompute))
    config_fail(doc, kSection, "recompute",
                "must be none, selective or full, got '" + t.recompute + "'");
  if (t.recompute_layers < 0)
    config_fail(doc, kSection, "recompute_layers", "must not be negative");
  if (t.recompute_layers > 0 && recompute != Recompute::full)
    config_fail(doc, kSection, "recompute_layers",
                "counts the blocks that recompute under training.recompute: full, not '" +
                    t.recompute + "'");
  // The first pipeline chunk is the largest (layers/model_facts.h).
  const std::int64_t chunks = std::max<std::int64_t>(
      1, c.parallel.pipeline * std::max<std::int64_t>(1, c.parallel.virtual_stages));
  const StageBlocks largest = pipeline_stage_blocks(c.model.n_layer, chunks, 0);
  if (c.model.n_layer >= chunks && t.recompute_layers > largest.end - largest.begin)
    config_fail(doc, kSection, "recompute_layers",
                "is more than the largest pipeline chunk's blocks (" +
                    std::to_string(largest.end - largest.begin) +
                    "): it counts a chunk's blocks (0 recomputes them all)");
  if (purpose == TrainConfig::Purpose::evaluation && c.data.val.empty())
    config_fail(doc, "data", "val", "is what --eval-only evaluates on: set it");
  if (t.eval_interval > 0 && c.data.val.empty())
    config_fail(doc, kSection, "eval_interval", "needs data.val (a validation .bin file)");
  if (purpose == TrainConfig::Purpose::training && c.data.train.empty())
    config_fail(doc, "data", "train", "is required: a token file made by ternion-prepare");
  if (c.optimizer.warmup_steps > t.steps)
    config_fail(doc, "optimizer", "warmup_steps", "is longer than training.steps");
  if (c.optimizer.decay_steps > t.steps - c.optimizer.warmup_steps)
    config_fail(doc, "optimizer", "decay_steps",
                std::to_string(c.optimizer.decay_steps) +
                    " is more than the steps after warm-up: training.steps - "
                    "optimizer.warmup_steps = " +
                    std::to_string(t.steps - c.optimizer.warmup_steps));
  if (c.logging.log_interval < 1) config_fail(doc, "logging", "log_interval", "must be at least 1");
  if (!(c.logging.peak_tflops >= 0) || !std::isfinite(c.logging.peak_tflops))
    config_fail(doc, "logging", "peak_tflops", "must be a finite number, 0 or more");
  const CheckpointConfig& k = c.checkpoint;
  if (k.save_interval < 0) config_fail(doc, "checkpoint", "save_interval", "must not be negative");
  if (k.keep < 1) config_fail(doc, "checkpoint", "keep", "must be at least 1");
  if (k.keep_every < 0) config_fail(doc, "checkpoint", "keep_every", "must not be negative");
  // Only saves are kept: milestones fall where saves do.
  if (k.keep_every > 0 && k.save_interval == 0)
    config_fail(doc, "checkpoint", "keep_every",
                "needs checkpoint.save_interval: a run that saves only at its end has no "
                "milestones to keep");
  if (k.keep_every > 0 && k.keep_every % k.save_interval != 0)
    config_fail(doc, "checkpoint", "keep_every",
                std::to_string(k.keep_every) + " is not a multiple of checkpoint.save_interval (" +
                    std::to_string(k.save_interval) +
                    "): no save would fall on its steps but the last");
  if (k.save_interval > 0 && k.save_dir.empty())
    config_fail(doc, "checkpoint", "save_interval", "needs checkpoint.save_dir");
  if (k.load == "latest" && k.save_dir.empty())
    config_fail(doc, "checkpoint", "load", "'latest' needs checkpoint.save_dir");
  const ParallelConfig& p = c.parallel;
  if (!c.logging.trace_file.empty() && p.pipeline * p.virtual_stages < 2)
    config_fail(doc, "logging", "trace_file",
                "records a pipeline schedule's timeline: it needs parallel.pipeline > 1");
  if (c.logging.trace_step < 0 || c.logging.trace_step > t.steps)
    config_fail(doc, "logging", "trace_step",
                "must be between 0 (the last step) and training.steps");
  refuse_unused_keys(doc, "logging", c.logging, c.logging.unused_keys(),
                     "picks the step logging.trace_file records: it needs logging.trace_file");
  if (p.schedule != "1f1b" && p.schedule != "gpipe" && p.schedule != "zb-h1")
    config_fail(doc, "parallel", "schedule",
                "must be 1f1b, gpipe or zb-h1, got '" + p.schedule + "'");
  if (p.virtual_stages < 1) config_fail(doc, "parallel", "virtual_stages", "must be at least 1");
  if (p.virtual_stages > 1 && p.schedule != "1f1b")
    config_fail(doc, "parallel", "virtual_stages",
                "interleaving (virtual_stages > 1) runs the interleaved 1F1B schedule, not " +
                    p.schedule + "; set parallel.schedule: 1f1b or virtual_stages: 1");
  if (c.model.n_layer < p.pipeline * p.virtual_stages)
    config_fail(doc, "parallel", "virtual_stages",
                std::to_string(p.pipeline * p.virtual_stages) +
                    " model chunks (parallel.pipeline x parallel.virtual_stages) need at least as "
                    "many blocks, but model.n_layer is " + std::to_string(c.model.n_layer));
  if (p.pipeline > 1 || p.virtual_stages > 1) {
    // Pipeline messages are tagged by (micro-batch, chunk, kind); MPI guarantees tags to 32767,
    // so a rank runs at most 16383 micro-batches x model chunks in a step or an evaluation.
    const std::int64_t most = 16383 / p.virtual_stages;
    const std::string tags = "; with parallel.virtual_stages " +
                             std::to_string(p.virtual_stages) +
                             ", MPI's message tags allow at most " + std::to_string(most);
    const std::int64_t step_batches = c.micro_batches_per_step(world_size);
    if (step_batches > most)
      config_fail(doc, kSection, "global_batch_size",
                  "makes " + std::to_string(step_batches) + " micro-batches per step on each "
                  "data-parallel rank (global_batch_size / (micro_batch_size x data))" + tags);
    // An evaluation runs each batch's micro-batches as a step does: compared in the same unit.
    if (t.eval_interval > 0 && t.eval_batches > most / step_batches)
      config_fail(doc, kSection, "eval_batches",
                  "makes " + std::to_string(t.eval_batches) + " x " +
                      std::to_string(step_batches) + " micro-batches per evaluation on each "
                      "data-parallel rank" + tags);
    try {
      validate_pipeline_schedule(p.pipeline_schedule(), static_cast<int>(p.pipeline),
                                 static_cast<int>(c.micro_batches_per_step(world_size)),
                                 static_cast<int>(p.virtual_stages));
    } catch (const ConfigError& e) {
      TN_THROW(ConfigError, doc.source_name(), ": ", e.what());
    }
  }
}

}  // namespace

TrainConfig TrainConfig::from_document(ConfigDocument doc,
                                       const std::vector<std::string>& overrides,
                                       std::int64_t world_size, Purpose purpose) {
  for (const std::string& assignment : overrides) doc.apply_override(assignment);
  TrainConfig c = read_unchecked(doc);
  doc.check_all_declared();
  c.model.validate(doc);
  c.parallel.validate(doc, world_size);
  c.parallel.validate_model_fit(doc, model_sharding_shape(c.model));
  c.optimizer.validate(doc);
  validate_training(doc, c, world_size, purpose);
  return c;
}

TrainConfig TrainConfig::read_unchecked(ConfigDocument& doc) {
  TrainConfig c;
  c.source = doc.source_name();
  for_each_section(
      c, [&](const char* name, auto& section) { read_config_section(doc, name, section); });
  return c;
}

TrainConfig TrainConfig::parse(const std::string& yaml, const std::string& source_name,
                               const std::vector<std::string>& overrides,
                               std::int64_t world_size) {
  return from_document(ConfigDocument::parse(yaml, source_name), overrides, world_size);
}

TrainConfig TrainConfig::load(const std::string& path, const std::vector<std::string>& overrides,
                              std::int64_t world_size) {
  return from_document(ConfigDocument::load_file(path), overrides, world_size);
}

std::int64_t TrainConfig::micro_batches_per_step(std::int64_t world_size) const {
  return training.global_batch_size / (parallel.micro_batch_size * parallel.data_size(world_size));
}

namespace {
std::vector<std::string> unused_keys_of(const ModelConfig& model) {
  return model_family(model.family).unused_keys(model);
}
template <class Section>
std::vector<std::string> unused_keys_of(const Section& section) {
  if constexpr (requires { section.unused_keys(); }) return section.unused_keys();
  return {};
}

// The keys `c` leaves unused are printed commented out: where given, they are refused.
void print_sections(std::ostream& out, const TrainConfig& c) {
  TrainConfig::for_each_section(c, [&](const char* name, const auto& section) {
    const std::vector<std::string> unused = unused_keys_of(section);
    print_config_section(out, name, section, std::set<std::string>(unused.begin(), unused.end()));
  });
}
}  // namespace

std::string config_yaml(const TrainConfig& config) {
  std::ostringstream out;
  print_sections(out, config);
  return out.str();
}

void print_config_schema(std::ostream& out) {
  print_sections(out, TrainConfig{});
}


std::vector<std::string> LoggingConfig::unused_keys() const {
  if (trace_file.empty()) return {"trace_step"};
  return {};
}

std::string LoggingConfig::flight_directory() const {
  if (!flight_dir.empty()) return flight_dir;
  const std::filesystem::path beside = std::filesystem::path(metrics_file).parent_path();
  return (metrics_file.empty() || beside.empty() ? std::filesystem::path("flight")
                                                 : beside / "flight").string();
}

}  // namespace ternion
