// The training loop on one rank: micro-batches with gradient accumulation, global-norm
// clipping, the LR schedule, periodic evaluation, per-step logs and metrics, and a generated
// sample at the end.
//
// One optimizer step (1-based, `training.steps: N` runs steps 1..N):
//   1. sample the step's global batch (training.global_batch_size sequences) and count its
//      valid target tokens; every token's loss has weight 1 / that count
//   2. for each micro-batch (parallel.micro_batch_size sequences) of this data-parallel
//      rank's share of the global batch: forward, backward (parameter gradients accumulate);
//      with pipeline stages, in the schedule's order, and the two copies of the tied
//      embedding (first and last stage) sum their gradients; during the last micro-batch's
//      backward, gradient buckets are reduced over the data-parallel group as they complete
//   3. loss = the global-batch mean, before the update; gradients that are partial sums over
//      the tensor-parallel group (sequence parallelism) are summed; grad norm over all
//      parameters, each counted once; clip
//   4. a step whose gradients are not finite is skipped (logged, no update)
//   5. optimizer update at the step's learning rate (ZeRO-1: each data-parallel rank updates
//      its share of the parameters, then they are all-gathered)
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "data/batch_sampler.h"
#include "data/data_blend.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "layers/gpt_model.h"
#include "layers/mixed_precision.h"
#include "layers/model_facts.h"
#include "optimizers/optimizer.h"
#include "parallel/gradient_reducer.h"
#include "parallel/pipeline_executor.h"
#include "parallel/process_groups.h"
#include "training/checkpoint_retention.h"
#include "training/generation.h"
#include "training/metrics_writer.h"
#include "training/model_stage.h"
#include "training/train_config.h"

namespace ternion {


class Trainer {
 public:
  // Opens the data (DataError on bad files), checks that checkpoint.save_dir can be written
  // (ConfigError), builds and initialises the model (or loads checkpoint.load: CheckpointError
  // for a bad one). With `groups`, the model is sharded over their tensor-parallel group
  // (every rank of it runs the same steps on the same data) and split into pipeline stages
  // over their pipeline group, `parallel.virtual_stages` chunks per rank, run by the
  // configured schedule.
  //
  // Build::meta builds the same rank (model chunks, schedule, reducer, optimizer) on the meta
  // device (framework/device.h): no values, nothing initialised or read but the data's
  // headers, nothing checked on disk; its train_step allocates what a real step allocates
  // and computes nothing (training/memory_estimate.h runs it over layout-only groups).
  enum class Build { run, meta };
  explicit Trainer(const TrainConfig& config, const ProcessGroups* groups = nullptr,
                   Build build = Build::run);
  Trainer(const Trainer&) = delete;  // the samplers point into the shards held here
  Trainer& operator=(const Trainer&) = delete;

  StepMetrics train_step(std::int64_t step);
  double evaluate();  // mean loss over training.eval_batches global batches of data.val
  // Trains the steps after the loaded checkpoint's (all of them without one), logging each
  // and writing metrics; returns the last step's metrics. SIGTERM / SIGINT, and
  // training.time_limit_minutes, stop it after the step in progress, with a checkpoint when
  // checkpoint.save_dir is set.
  StepMetrics run();
  bool stopped_early() const { return stopped_early_; }  // by a signal or the time limit
  // training.time_limit_minutes counts from `start` (the program's; by default, from when this
  // trainer began to be built).
  void set_time_limit_start(std::chrono::steady_clock::time_point start) { started_ = start; }
  std::int64_t resumed_step() const { return resumed_step_; }  // 0: a fresh run
  // The whole windows an evaluation cycles through (0 without data.val).
  std::int64_t val_windows() const { return val_sampler_ ? val_sampler_->window_count() : 0; }
  // Samples text from the model (collective); options.tokenizer is usually tokenizer().
  std::string generate(const SampleOptions& options);
  // The training.sample_* options through the run's tokenizer, seeded with training.seed.
  SampleOptions sample_options() const;
  // Generates the configured sample and logs it after `heading` (collective).
  void log_sample(const std::string& heading);
  const Tokenizer& tokenizer() const { return tokenizer_; }
  // data.train; null where it is empty (--eval-only reads only data.val).
  const DataBlend* train_data() const { return train_data_ ? &*train_data_ : nullptr; }
  const TokenDataset* val_data() const { return val_data_ ? &*val_data_ : nullptr; }

  // Checkpoints (training/checkpoint.h): save the state after `step` (collective) and return
  // what it wrote, or load it from `dir` (any layout) and return its step.
  struct CheckpointTransfer {
    double bytes = 0;    // the checkpoint's tensors, each element once
    double seconds = 0;  // the slowest rank's
    std::string str() const;  // "1488.2 MB in 2.13 s, 699 MB/s"
  };
  CheckpointTransfer save_checkpoint(std::int64_t step);
  std::int64_t load_checkpoint(const std::string& dir);

  // The whole model (one rank, or one pipeline stage of a tensor-parallel group).
  GptModel& model();
  // This rank's parameters, every chunk's, each once.
  const std::vector<Parameter*>& parameters() const { return parameters_; }
  const GradientReducer* reducer() const { return reducer_.get(); }
  // The last pipelined step's timeline and activation count on this rank.
  const PipelineStepResult& last_pipeline_step() const { return last_pipeline_step_; }
  // The global gradient norm: every parameter counted once, however it is sharded.
  double grad_norm();
  const TrainConfig& config() const { return config_; }
  Device device() const { return device_; }  // where parameters, activations and gradients live
  std::size_t optimizer_state_bytes() const { return optimizer_->state_bytes(); }
  // The optimizer and what it updates on this rank (whole parameters, or ZeRO shares).
  const Optimizer& optimizer() const { return *optimizer_; }
  const std::vector<ParameterSegment>& optimizer_segments() const { return segments_; }
  // The gradients' memory on this rank: what lasts the step (whole, or under ZeRO-2 a shard),
  // and the most held at once in the last step (ZeRO-2's buckets being filled or reduced).
  std::size_t gradient_bytes() const;
  std::size_t peak_gradient_bytes() const;
  // This rank's estimated peak (training/memory_estimate.h), set on every rank or none: run()
  // writes it into the first step's metrics and logs it per rank beside the measured peak.
  void set_memory_estimate(std::size_t bytes) { memory_estimate_ = bytes; }

 private:
  void reduce_partial_gradients();
  // Whether this rank saves `p`'s values, or its optimizer state: each element once, however
  // data ranks, tensor ranks and the tied embedding's copies replicate it.
  bool saves_value(const Parameter* p) const;
  bool saves_state(const Parameter* p) const;
  // `bytes` summed over the world and the slowest rank's `seconds` (collective).
  CheckpointTransfer checkpoint_transfer(double bytes, double seconds);
  bool writes_output() const;  // rank 0 of the job writes the metrics file
  std::vector<std::string> input_files() const;  // the data's shards, which no output may be
  bool pipelined() const { return pipeline_ != nullptr; }
  std::vector<GptModel*> chunk_pointers() const;
  std::int64_t sequence_parts() const;  // of a micro-batch's sequence, under sequence parallelism
  // The pipeline group's sum of a value only some stages hold (the loss on the last stage).
  double sum_over_pipeline(double value);
  Tensor full_logits(const Tensor& tokens);  // on every rank
  void trace_last_step(std::int64_t step);    // logging.trace_file
  void log_memory_against_estimate(const StepMetrics& first);  // collective

  // Token batches onto this rank's device (targets are counted on the host first).
  TokenBatch on_device(const TokenBatch& batch) const;
  void after_master_update();  // re-rounds the bf16 compute copies (mixed precision)

  // Where training.time_limit_minutes counts from (set_time_limit_start).
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  TrainConfig config_;
  std::unique_ptr<ProcessGroups> own_groups_;  // the one-rank layout, made without `groups`
  const ProcessGroups& groups_;
  Device device_;         // training.device: where parameters, activations and gradients live
  Precision precision_;   // training.precision
  TensorParallel tp_;
  Tokenizer tokenizer_;  // data.tokenizer
  std::optional<DataBlend> train_data_;
  std::optional<TokenDataset> val_data_;
  std::optional<BatchSampler> train_sampler_;
  std::optional<BatchSampler> val_sampler_;
  std::vector<std::unique_ptr<GptModel>> chunks_;
  std::vector<Parameter*> parameters_;
  std::unique_ptr<PipelineExecutor> pipeline_;
  std::unique_ptr<GradientReducer> reducer_;  // with data parallelism
  std::vector<ParameterSegment> segments_;    // what this rank's optimizer updates
  std::vector<const Parameter*> tied_copies_; // the last stage's wte copy (pp > 1)
  std::int64_t last_micro_batch_ = 0;
  std::string resumed_from_;        // checkpoint.load resolved
  std::int64_t resumed_step_ = 0;   // the loaded checkpoint's step (0: a fresh run)
  // Optimizer updates applied: AdamW's bias correction counts these, as PyTorch's and
  // Megatron's do, so a step skipped for non-finite gradients does not advance it.
  std::int64_t updates_ = 0;
  CheckpointTransfer resume_transfer_;  // the load's, counted as a save of this layout counts
  CheckpointRetention checkpoint_retention_;  // what this run's saves prune
  bool stopped_early_ = false;
  std::vector<PipelineAction> schedule_;
  PipelineStepResult last_pipeline_step_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<std::size_t> memory_estimate_;
  // A step's model FLOPs, all ranks' together (layers/model_facts.h).
  double step_model_flops_ = training_flops_per_token(config_.model) *
                             static_cast<double>(config_.training.global_batch_size) *
                             static_cast<double>(config_.model.seq_len);
};

// Opens the token files config key `key` names (data/token_dataset.h; weights refused:
// open_unweighted) and checks that they fit the model: tokens below model.vocab_size, every
// shard at least one window of seq_len + 1 tokens. DataError otherwise.
// With a BPE `tokenizer`, tokens must also be ones it has (else the data came from another).
TokenDataset open_dataset(const std::string& key, const std::string& spec,
                          const ModelConfig& model, const Tokenizer& tokenizer);
// open_dataset for data.train: a blend of weighted datasets, or one (data/data_blend.h).
DataBlend open_blend(const std::string& key, const std::string& spec, const ModelConfig& model,
                     const Tokenizer& tokenizer);

// The run's tokenizer (data.tokenizer), checked against the model: every token below
// model.vocab_size, and a prompt that becomes tokens it has (DataError / ConfigError).
Tokenizer open_tokenizer(const TrainConfig& config);

std::string format_duration(double seconds);  // "1:02:03" / "2:03"

}  // namespace ternion
