// The whole run's configuration: every section, read from one YAML file plus --set
// overrides, validated against itself and the world size.
//
// Sections and their schemas live beside the code that uses them: model (layers/
// model_config.h), parallel (parallel/parallel_config.h), optimizer (optimizers/
// optimizer_config.h), data (data/data_config.h); training and logging are here.
// `ternion-train --print-config` prints every key with its default and meaning.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "data/data_config.h"
#include "layers/model_config.h"
#include "optimizers/optimizer_config.h"
#include "parallel/parallel_config.h"

namespace ternion {

struct TrainingConfig {
  std::int64_t steps = 100;             // optimizer steps
  std::int64_t global_batch_size = 16;  // sequences per optimizer step
  std::int64_t seed = 1234;             // initialisation, data order, dropout, sampling
  std::int64_t eval_interval = 0;       // evaluate on data.val every N steps (0 = never)
  std::int64_t eval_batches = 1;        // batches of global_batch_size sequences of data.val
  std::int64_t threads = 0;             // OpenMP / OpenBLAS threads per rank (0 = default)
  std::int64_t sample_tokens = 200;     // tokens generated at the end (0 = none)
  std::int64_t sample_interval = 0;     // also sample every N steps (0 = only at the end)
  double sample_temperature = 0.8;
  std::int64_t sample_top_k = 40;       // 0 = the whole vocabulary
  double sample_top_p = 1.0;            // nucleus sampling (1 = off)
  std::string sample_prompt = "The ";
  std::string device = "cpu";     // cpu | cuda (one GPU per rank, from the node-local rank)
  std::string precision = "fp32";  // fp32 | bf16 (bf16 compute, f32 master weights and state)
  std::string attention = "auto";  // auto | cudnn | cublas: the CUDA attention kernel
  std::string gelu_epilogue = "check";  // check | on | off: cuBLASLt's GELU in bf16 MLP GEMMs
  bool deterministic = true;  // bit-for-bit repeatable runs (cuDNN attention's backward)
  std::string recompute = "none";    // none | selective | full (layers/gpt_model.h)
  std::int64_t recompute_layers = 0;  // full: blocks per pipeline chunk that recompute (0 = all)
  double time_limit_minutes = 0.0;    // save and stop once this much time has passed (0 = none)

  template <class V>
  void visit(V& v) {
    v("steps", steps, "optimizer steps to train");
    v("global_batch_size", global_batch_size, "sequences per optimizer step");
    v("seed", seed, "seed of initialisation, data order, dropout and sampling");
    v("eval_interval", eval_interval, "evaluate on data.val every N steps (0 = never)");
    v("eval_batches", eval_batches,
      "batches of global_batch_size sequences of data.val per evaluation (as Megatron's "
      "eval_iters: the same windows in every layout)");
    v("threads", threads, "threads per rank (0 = OMP_NUM_THREADS or all cores)");
    v("sample_tokens", sample_tokens, "tokens to generate after training (0 = none)");
    v("sample_interval", sample_interval,
      "also log a sample every N steps, as llm.c does, to watch the text improve (0 = only at "
      "the end)");
    v("sample_temperature", sample_temperature, "sampling temperature");
    v("sample_top_k", sample_top_k, "sample from the k most likely tokens (0 = all)");
    v("sample_top_p", sample_top_p,
      "then from the fewest most likely tokens whose probability reaches p (nucleus sampling, "
      "as transformers' top_p; 1 = all)");
    v("sample_prompt", sample_prompt, "text the generated sample starts from");
    v("device", device, "cpu or cuda (each rank takes GPU node_local_rank % GPUs per node)");
    v("precision", precision,
      "fp32, or bf16: bf16 weights and activations for compute, f32 master weights, gradients "
      "and optimizer state");
    v("attention", attention,
      "CUDA attention kernel: auto (cuDNN's fused flash attention where it runs: bf16 on a "
      "build with cudnn-frontend; else cublas), cudnn (or fail), cublas (batched GEMMs)");
    v("gelu_epilogue", gelu_epilogue,
      "cuBLASLt's GELU epilogues in bf16 MLP GEMMs: check (where a run-time check finds them "
      "to be GPT-2's GELU to bf16 rounding), on (wherever offered), off (our GELU kernels)");
    v("deterministic", deterministic,
      "runs repeat bit for bit; false lets cuDNN's attention backward take its faster "
      "algorithm, whose atomic adds make runs differ in rounding");
    v("recompute", recompute,
      "activation recomputation: none, selective (norm, GELU and SwiGLU outputs recomputed in "
      "the backward) or full (a block keeps its input and runs its forward again)");
    v("recompute_layers", recompute_layers,
      "with recompute: full, how many blocks of each pipeline chunk recompute, the first ones "
      "(0 = all)");
    v("time_limit_minutes", time_limit_minutes,
      "save a checkpoint and stop after the step that passes this many minutes since start-up, "
      "so a job ends itself before its scheduler's time limit (as Megatron's "
      "exit-duration-in-mins); 0 = none");
  }
};

struct LoggingConfig {
  std::string metrics_file;  // JSON lines, one object per step; empty = none
  std::int64_t log_interval = 1;
  std::string trace_file;      // Chrome trace of one pipeline step; empty = none
  std::int64_t trace_step = 0;  // the step traced (0 = the last)
  std::string flight_dir;       // empty: flight/ beside metrics_file (or in the working dir)
  double peak_tflops = 0.0;     // a rank's peak, for MFU (0 = MFU not reported)

  template <class V>
  void visit(V& v) {
    v("metrics_file", metrics_file,
      "JSONL file with one object per step (empty = none); a resumed run keeps its lines up to "
      "the checkpoint's step");
    v("log_interval", log_interval, "print a log line every N steps");
    v("trace_file", trace_file, "Chrome-trace JSON of one pipeline step's timeline (empty = none)");
    v("trace_step", trace_step, "the step logging.trace_file records (0 = the last step)");
    v("flight_dir", flight_dir,
      "where each rank writes its last communication operations (rank_R.json) on a hang, an "
      "error or a signal (empty = flight/ beside metrics_file, or in the working directory)");
    v("peak_tflops", peak_tflops,
      "one rank's peak TFLOP/s at the run's precision (a GPU's datasheet figure, say): each "
      "step then logs its MFU, the model TFLOP/s per rank over it (0 = no MFU)");
  }
  // flight_dir, or its default.
  std::string flight_directory() const;
  // The keys the rest of the section leaves unused (refused where given): trace_step without
  // a trace_file.
  std::vector<std::string> unused_keys() const;
};

struct CheckpointConfig {
  std::string save_dir;            // empty = no checkpoints
  std::int64_t save_interval = 0;  // save every N steps (0 = only at the end and on SIGTERM)
  std::int64_t keep = 3;           // this run's newest N (training/checkpoint_retention.h)
  std::int64_t keep_every = 0;     // also keep steps that are multiples of this (0 = none)
  std::string load;                // a checkpoint directory, or "latest" (in save_dir)

  template <class V>
  void visit(V& v) {
    v("save_dir", save_dir, "directory of checkpoints (empty = none)");
    v("save_interval", save_interval, "save every N steps (0 = at the end and on SIGTERM only)");
    v("keep", keep,
      "checkpoints kept: this run's newest saves (then the newest older ones); later steps "
      "of another run are left while they are ahead of this run's saves");
    v("keep_every", keep_every,
      "never delete a checkpoint whose step is a multiple of this, as llm.c's major "
      "checkpoints (a multiple of save_interval; 0 = none)");
    v("load", load,
      "resume from this checkpoint directory (a save_dir: its latest), or 'latest' in save_dir "
      "(none yet: the run starts afresh)");
  }
};

struct TrainConfig {
  ModelConfig model;
  ParallelConfig parallel;
  TrainingConfig training;
  OptimizerConfig optimizer;
  DataConfig data;
  LoggingConfig logging;
  CheckpointConfig checkpoint;
  std::string source;  // where it was read from, for messages

  // Reads FILE, applies "section.key=value" overrides, refuses unknown keys, wrong types and
  // impossible values with one ConfigError naming the key and its line.
  static TrainConfig load(const std::string& path, const std::vector<std::string>& overrides,
                          std::int64_t world_size = 1);
  static TrainConfig parse(const std::string& yaml, const std::string& source_name,
                           const std::vector<std::string>& overrides,
                           std::int64_t world_size = 1);

  // What a config is read for: a training run (data.train required), or an evaluation of a
  // model on data.val alone (ternion-train --eval-only: data.val required).
  enum class Purpose { training, evaluation };
  static TrainConfig from_document(ConfigDocument doc, const std::vector<std::string>& overrides,
                                   std::int64_t world_size = 1,
                                   Purpose purpose = Purpose::training);
  // The document's values, each key it leaves out at its default, with no check of whether
  // they make a run: what a checkpoint's config.yaml says its run was.
  static TrainConfig read_unchecked(ConfigDocument& doc);

  // Calls visit(name, section) for each section, in the order a config file lists them: the
  // one list of the sections, which reading and printing share.
  template <class Self, class Visit>
  static void for_each_section(Self& c, Visit&& visit) {
    visit("model", c.model);
    visit("parallel", c.parallel);
    visit("training", c.training);
    visit("optimizer", c.optimizer);
    visit("data", c.data);
    visit("logging", c.logging);
    visit("checkpoint", c.checkpoint);
  }

  std::int64_t micro_batches_per_step(std::int64_t world_size = 1) const;
};

// Every section and key with its default value and documentation, as YAML.
void print_config_schema(std::ostream& out);
// The values of `config`, as a YAML config file that reads back as it.
std::string config_yaml(const TrainConfig& config);

}  // namespace ternion
