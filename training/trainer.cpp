#include "training/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include "framework/device_runtime.h"
#include "framework/logging.h"
#include "framework/parameter.h"
#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "optimizers/grad_clip.h"
#include "optimizers/lr_schedule.h"
#include "parallel/comm/comm_backend.h"
#include "parallel/comm/comm_watchdog.h"
#include "parallel/pipeline_simulator.h"
#include "parallel/powersgd_reduction.h"
#include "training/checkpoint.h"
#include "training/hf_import.h"
#include "training/pipeline_trace.h"
#include "training/resume_changes.h"
#include "training/run_outputs.h"

namespace ternion {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A double summed over a group through f32 collectives: carried as a high and a low part, so
// the sum keeps about 14 digits instead of f32's 7.
double all_reduce_double(Communicator& group, double value) {
  const float high = static_cast<float>(value);
  Tensor parts = Tensor::from_vector({high, static_cast<float>(value - high)}, {2});
  group.all_reduce(parts, ReduceOp::Sum);
  return static_cast<double>(parts.data<float>()[0]) + parts.data<float>()[1];
}

}  // namespace

Trainer::CheckpointTransfer Trainer::checkpoint_transfer(double bytes, double seconds) {
  Tensor slowest = Tensor::from_vector({static_cast<float>(seconds)}, {1});
  groups_.world().all_reduce(slowest, ReduceOp::Max);
  return {all_reduce_double(groups_.world(), bytes), slowest.data<float>()[0]};
}

namespace {

// Trainer::run stops with a TrainingError after this many steps in a row skipped for
// non-finite gradients.
constexpr std::int64_t kMaxSkippedStepsInARow = 10;

// Set by SIGTERM / SIGINT / SIGUSR1 during Trainer::run: save and stop after the current step
// (SIGUSR1: what mpirun passes on to the ranks unchanged; launch/ternion-run sends it).
std::atomic<bool> g_stop_requested{false};
// Why the ranks stop early, agreed as a maximum over the world.
constexpr float kStopForSignal = 1.0f;
constexpr float kStopForTime = 2.0f;
// What the first signal answers at once (rank 0 only; write(2) is async-signal-safe), so that
// a user who sees the step go on does not press Ctrl-C again. Set before the handler is.
const char* g_stop_answer = "";
std::size_t g_stop_answer_length = 0;
// A second signal gets the default action (the process ends), for a run that hangs.
extern "C" void request_stop(int signal) {
  request_flight_record();  // what this rank was waiting for, should the step not end
  if (!g_stop_requested.exchange(true) && g_stop_answer_length > 0)
    [[maybe_unused]] const auto written = write(STDERR_FILENO, g_stop_answer, g_stop_answer_length);
  std::signal(signal, SIG_DFL);
}

// Installs request_stop for SIGTERM and SIGINT while a run lasts.
class StopSignals {
 public:
  explicit StopSignals(bool saves) {
    prepare_answer(saves);
    g_stop_requested = false;
    term_ = std::signal(SIGTERM, request_stop);
    int_ = std::signal(SIGINT, request_stop);
    usr1_ = std::signal(SIGUSR1, request_stop);
  }
  ~StopSignals() {
    std::signal(SIGTERM, term_);
    std::signal(SIGINT, int_);
    std::signal(SIGUSR1, usr1_);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static void prepare_answer(bool saves) {
    static constexpr char kSaving[] =
        "ternion: signal received: stopping after this step and saving a checkpoint; a second "
        "signal ends the run at once, without saving\n";
    static constexpr char kNotSaving[] =
        "ternion: signal received: stopping after this step (checkpoint.save_dir is not set: "
        "nothing is saved); a second signal ends the run at once\n";
    g_stop_answer = saves ? kSaving : kNotSaving;
    g_stop_answer_length = log_state().rank == 0 ? std::strlen(g_stop_answer) : 0;
  }

  void (*term_)(int);
  void (*int_)(int);
  void (*usr1_)(int);
};

// training.device: CUDA ranks take GPU node_local_rank % GPUs (several ranks may share one,
// with parallel.backend: mpi).
Device training_device(const TrainConfig& config, const ProcessGroups& groups) {
  if (config.training.device != "cuda") return Device::cpu();
  return init_cuda_device(groups.node_local().rank());
}

std::int64_t count_valid(const Tensor& targets) {
  const std::int32_t* t = targets.data<std::int32_t>();
  return std::count_if(t, t + targets.numel(), [](std::int32_t x) { return x >= 0; });
}

// The checks open_dataset's comment (trainer.h) names, on one dataset.
void check_fits(const std::string& key, const TokenDataset& dataset, const ModelConfig& model,
                const Tokenizer& tokenizer) {
  for (const TokenShard& shard : dataset.shards()) {
    TN_CHECK_AS(DataError, tokenizer.is_bytes() || shard.max_token() < tokenizer.vocab_size(),
                key, " '", shard.path(), "' holds token ", shard.max_token(),
                ", which data.tokenizer's ", tokenizer.vocab_size(),
                " tokens do not have: it was made with another tokenizer");
    TN_CHECK_AS(DataError, shard.max_token() < model.vocab_size, key, " '", shard.path(),
                "' holds token ", shard.max_token(), ", outside model.vocab_size = ",
                model.vocab_size);
    TN_CHECK_AS(DataError, shard.size() > model.seq_len, key, " '", shard.path(), "' holds ",
                shard.size(), " tokens, fewer than model.seq_len + 1 = ", model.seq_len + 1);
  }
}

}  // namespace

TokenDataset open_dataset(const std::string& key, const std::string& spec, const ModelConfig& model,
                          const Tokenizer& tokenizer) {
  TokenDataset dataset = open_unweighted(key, spec);
  check_fits(key, dataset, model, tokenizer);
  return dataset;
}

DataBlend open_blend(const std::string& key, const std::string& spec, const ModelConfig& model,
                     const Tokenizer& tokenizer) {
  DataBlend blend = DataBlend::open(key, spec);
  for (const BlendComponent& c : blend.components()) check_fits(key, c.data, model, tokenizer);
  return blend;
}

Tokenizer open_tokenizer(const TrainConfig& config) {
  const Tokenizer tokenizer = Tokenizer::open("data.tokenizer", config.data.tokenizer);
  // Bytes fit any vocabulary their data fits (a model of text without every byte value may
  // have fewer than 256 tokens); a BPE's ids may all occur.
  TN_CHECK_AS(DataError, tokenizer.is_bytes() || tokenizer.vocab_size() <= config.model.vocab_size,
              "data.tokenizer '", config.data.tokenizer, "' has ", tokenizer.vocab_size(),
              " tokens, more than model.vocab_size = ", config.model.vocab_size);
  const TrainingConfig& t = config.training;
  if (t.sample_tokens > 0 && !tokenizer.is_bytes()) {  // bytes: checked with the config
    const std::string problem = tokenizer.prompt_problem(t.sample_prompt, config.model.vocab_size);
    TN_CHECK_AS(ConfigError, problem.empty(), "training.sample_prompt: ", problem);
  }
  return tokenizer;
}

Trainer::Trainer(const TrainConfig& config, const ProcessGroups* groups, Build build)
    : config_(config),
      own_groups_(groups == nullptr ? ProcessGroups::one_rank() : nullptr),
      groups_(groups != nullptr ? *groups : *own_groups_),
      device_(build == Build::meta ? Device::meta() : training_device(config, groups_)),
      precision_(parse_precision(config.training.precision, "training.precision")),
      tp_{groups_.tp_size() > 1 ? &groups_.tensor() : nullptr, config.parallel.sequence_parallel},
      tokenizer_(open_tokenizer(config)),
      train_data_(config.data.train.empty()
                      ? std::nullopt
                      : std::optional<DataBlend>(
                            open_blend("data.train", config.data.train, config.model, tokenizer_))),
      val_data_(config.data.val.empty()
                    ? std::nullopt
                    : std::optional<TokenDataset>(
                          open_dataset("data.val", config.data.val, config.model, tokenizer_))),
      chunks_(),
      checkpoint_retention_(config.checkpoint.keep, config.checkpoint.keep_every) {
  if (train_data_ && val_data_) refuse_shared_shards(*train_data_, *val_data_);
  const bool meta = build == Build::meta;
  // Every rank writes its part of each checkpoint: each checks now, not after training.
  if (!meta) check_outputs_writable(config, groups_.world().rank(), input_files());
  const std::string resume = meta ? "" : checkpoint_to_resume(config.checkpoint);
  if (!meta && config.checkpoint.load == "latest") {
    // Every rank resumes, or none: a save_dir that one node sees otherwise (a local disk, a
    // stale network mount) would start it afresh while the others resume, to part ways later.
    Tensor resuming = Tensor::full({1}, resume.empty() ? 0.0f : 1.0f);
    groups_.world().all_reduce(resuming, ReduceOp::Sum);
    const auto seeing = static_cast<int>(resuming.data<float>()[0]);
    TN_CHECK_AS(CheckpointError, seeing == 0 || seeing == groups_.world().size(),
                "checkpoint.load: latest: ", seeing, " of ", groups_.world().size(),
                " ranks find a checkpoint in '", config.checkpoint.save_dir,
                "': checkpoint.save_dir must be one directory that every rank sees");
  }
  AttentionKernel attention = AttentionKernel::automatic;
  TN_CHECK_AS(ConfigError, parse_attention_kernel(config.training.attention, attention),
              "training.attention: must be auto, cudnn or cublas, got '",
              config.training.attention, "'");
  set_attention_kernel(attention);
  set_attention_deterministic(config.training.deterministic);
  GeluEpilogue gelu_epilogue = GeluEpilogue::check;
  TN_CHECK_AS(ConfigError, parse_gelu_epilogue(config.training.gelu_epilogue, gelu_epilogue),
              "training.gelu_epilogue: must be check, on or off, got '",
              config.training.gelu_epilogue, "'");
  set_gelu_epilogue(gelu_epilogue);
  check_tensor_groups_within_nodes(groups_);
  if (train_data_)
    train_sampler_.emplace(*train_data_, config.model.seq_len,
                           static_cast<std::uint64_t>(config.training.seed), "data.train");
  if (val_data_)
    val_sampler_.emplace(*val_data_, config.model.seq_len,
                         static_cast<std::uint64_t>(config.training.seed), "data.val");
  // This rank's model chunks: chunk c of pipeline rank s is virtual stage c * pp + s.
  const int stages = groups_.pp_size();
  const int stage = groups_.pp_rank();
  const auto virtual_stages = static_cast<int>(config.parallel.virtual_stages);
  const int total = stages * virtual_stages;
  {
    std::optional<ShapeOnlyParameters> shapes_only;
    if (meta) shapes_only.emplace();
    chunks_ = build_pipeline_chunks(config.model, tp_, stages, stage, virtual_stages);
  }
  RecomputePolicy recompute;
  parse_recompute(config.training.recompute, recompute.mode);
  recompute.full_blocks = config.training.recompute_layers;
  // A resume and model.init_from each overwrite every parameter: drawing them first would
  // spend most of a resume's start-up (seconds at 124M parameters, minutes past a billion).
  const bool loads_weights = !resume.empty() || !config.model.init_from.empty();
  for (auto& chunk : chunks_) {
    chunk->set_recompute(recompute);
    if (!meta && !loads_weights)
      chunk->initialize(static_cast<std::uint64_t>(config.training.seed));
    for (Parameter* p : chunk->parameters()) parameters_.push_back(p);
  }
  if (total > 1) {
    pipeline_ = std::make_unique<PipelineExecutor>(groups_.pipeline(), virtual_stages,
                                                   compute_dtype(precision_), device_);
    const int micro_batches =
        static_cast<int>(config.micro_batches_per_step(groups_.world().size()));
    schedule_ = pipeline_schedule(config.parallel.pipeline_schedule(), stages, micro_batches,
                                  virtual_stages, stage);
  } else if (!meta && config.parallel.pipeline_schedule() == PipelineSchedule::ZeroBubbleH1) {
    log_info("ternion: parallel.schedule zb-h1 on one pipeline stage has no bubble to fill: "
             "each backward runs whole, as with 1f1b");
  }
  // Both set: the checkpoint holds the whole training state, so it wins; said once.
  if (meta) {
    // Values do not matter to what is allocated: nothing is read.
  } else if (!config.model.init_from.empty() && resume.empty()) {
    import_hf_weights(config.model, config.model.init_from, parameters_);
    log_info("ternion: weights initialised from the Hugging Face model in ",
             config.model.init_from);
  } else if (!config.model.init_from.empty()) {
    log_info("ternion: checkpoint.load wins over model.init_from: resuming from '", resume,
             "', not reading the weights in '", config.model.init_from, "'");
  }
  // Built and initialised on the CPU (identically in every layout), then moved; the reducer
  // and the optimizer below allocate their buffers where the parameters are.
  place_parameters(parameters_, device_);
  set_compute_precision(parameters_, precision_);
  // The tied embedding's copies when the pipeline splits them over two stages.
  std::vector<bool> late;
  std::vector<Parameter*> backward_order;
  for (auto chunk = chunks_.rbegin(); chunk != chunks_.rend(); ++chunk) {
    const auto& params = (*chunk)->parameters();
    for (auto p = params.rbegin(); p != params.rend(); ++p) {
      backward_order.push_back(*p);
      late.push_back(pipelined() && *p == (*chunk)->tied_embedding());
    }
    if ((*chunk)->chunk().has_head && !(*chunk)->chunk().has_embedding &&
        (*chunk)->tied_embedding() != nullptr)
      tied_copies_.push_back((*chunk)->tied_embedding());
  }
  if (groups_.dp_size() > 1) {
    const auto bucket_bytes = static_cast<std::int64_t>(config.parallel.bucket_size_mb * 1e6);
    // The memory estimate's layout-only groups cannot split: it counts a flat f32 reduction.
    const GradReducePlan plan = plan_grad_reduce(
        meta ? GradReduceMode::Flat : parse_grad_reduce_mode(config.parallel.grad_reduce),
        groups_.layout().dp_group(groups_.world().rank()), groups_.node_of_rank(),
        groups_.dp_rank());
    if (!plan.why.empty()) log_info("ternion: ", plan.why);
    std::unique_ptr<BucketReduction> reduction;
    if (!meta && config.parallel.grad_compression == "powersgd") {
      reduction = std::make_unique<PowerSgdReduction>(
          groups_.data(), static_cast<int>(config.parallel.powersgd_rank),
          static_cast<std::uint64_t>(config.training.seed), config.parallel.powersgd_start_step);
    } else {
      reduction = std::make_unique<StagedReduction>(
          groups_.data(), plan,
          meta ? WireType::F32 : parse_wire_type(config.parallel.grad_reduce_dtype));
    }
    const BucketReduction* how = reduction.get();
    reducer_ = std::make_unique<GradientReducer>(backward_order, late, std::move(reduction),
                                                 bucket_bytes,
                                                 static_cast<int>(config.parallel.zero_stage));
    if (!meta) log_info("ternion: data-parallel gradients: ", how->describe());
    for (auto& chunk : chunks_) {
      chunk->set_gradient_ready_hook([this](const MicroBatchInfo& info,
                                            const std::vector<Parameter*>& params) {
        if (info.training && config_.parallel.overlap_grad_reduce &&
            (info.micro_batch == last_micro_batch_ || reducer_->reduces_every_micro_batch()))
          reducer_->mark_ready(params);
      });
      chunk->set_gradients_needed_hook(
          [this](const std::vector<Parameter*>& params) { reducer_->prepare(params); });
    }
  }
  segments_ = reducer_ ? reducer_->owned_segments() : whole_parameters(parameters_);
  optimizer_ = make_optimizer(config.optimizer, segments_);
  if (!resume.empty()) {
    resumed_from_ = resume;
    resumed_step_ = load_checkpoint(resumed_from_);
    after_master_update();
    // A step the checkpoint has already run is not traced again. Named explicitly, the
    // checkpoint is this run's choice: refused. 'latest' is a restart of the same command
    // (a requeue after the trace was written): said, not refused.
    const std::int64_t traced = config.logging.trace_step;
    if (!config.logging.trace_file.empty() && traced > 0 && traced <= resumed_step_ &&
        resumed_step_ < config.training.steps) {
      const std::string why = detail::concat(
          "logging.trace_step: step ", traced, " comes before this run's first step ",
          resumed_step_ + 1, " (it resumes from ", resumed_from_, ")");
      TN_CHECK_AS(ConfigError, config.checkpoint.load == "latest",
                  config.source.empty() ? "" : config.source + ": ", why,
                  ": trace a later step, or 0 for the last");
      log_info("ternion: ", why, ": no step is traced in this run");
    }
  }
}

TokenBatch Trainer::on_device(const TokenBatch& batch) const {
  return {batch.inputs.to(device_), batch.targets.to(device_)};
}

void Trainer::after_master_update() { refresh_compute_copies(parameters_); }

GptModel& Trainer::model() {
  TN_CHECK(chunks_.size() == 1 && !pipelined(), "model() of a pipelined run: use parameters()");
  return *chunks_.front();
}


std::vector<GptModel*> Trainer::chunk_pointers() const {
  std::vector<GptModel*> out;
  for (const auto& chunk : chunks_) out.push_back(chunk.get());
  return out;
}

std::int64_t Trainer::sequence_parts() const {
  return config_.parallel.sequence_parallel ? tp_.size() : 1;
}

std::size_t Trainer::gradient_bytes() const {
  if (reducer_) return reducer_->lasting_gradient_bytes();
  std::size_t bytes = 0;
  for (const Parameter* p : parameters_) bytes += p->grad.nbytes();
  return bytes;
}

std::size_t Trainer::peak_gradient_bytes() const {
  return reducer_ ? reducer_->stats().peak_gradient_bytes : gradient_bytes();
}

double Trainer::sum_over_pipeline(double value) {
  return pipelined() ? all_reduce_double(groups_.pipeline(), value) : value;
}

StepMetrics Trainer::train_step(std::int64_t step) {
  TN_CHECK(train_sampler_.has_value(), "a training step without data.train");
  const auto start = Clock::now();
  // Activations, their gradients and temporaries: what the step allocates beyond the
  // parameters, gradients and optimizer state it starts with.
  reset_device_peak_memory(device_);
  const std::size_t resident = device_memory_stats(device_).in_use;
  const std::int64_t micro = config_.parallel.micro_batch_size;
  const int world = groups_.world().size();
  const std::int64_t n_micro = config_.micro_batches_per_step(world);
  last_micro_batch_ = n_micro - 1;
  // This data-parallel rank's share of the global batch: sequences [first, first + share).
  const std::int64_t share = n_micro * micro;
  const std::int64_t first = groups_.dp_rank() * share;

  std::vector<TokenBatch> batches;
  double valid_tokens = 0.0;
  for (std::int64_t m = 0; m < n_micro; ++m) {
    const TokenBatch batch = train_sampler_->sample(step, first + m * micro, micro);
    valid_tokens += static_cast<double>(count_valid(batch.targets));
    batches.push_back(on_device(batch));
  }
  if (reducer_) valid_tokens = all_reduce_double(groups_.data(), valid_tokens);
  const float loss_weight = valid_tokens > 0 ? static_cast<float>(1.0 / valid_tokens) : 0.0f;
  if (reducer_) reducer_->begin_step();

  std::vector<Tensor> grads;
  grads.reserve(parameters_.size());
  for (Parameter* p : parameters_)
    if (p->grad.defined()) grads.push_back(p->grad);  // ZeRO-2's come zeroed when needed
  zero_many(grads);  // one launch on a GPU, not one memset per parameter
  // The phases' timestamps, read once the step has synchronised (reading one earlier would
  // make the host wait for the GPU inside the step).
  const DeviceTimestamp phases_start = record_timestamp(device_);
  std::vector<std::pair<DeviceTimestamp, DeviceTimestamp>> forwards;  // start, end of each
  MicroBatchInfo info;
  info.step = step;
  info.seed = static_cast<std::uint64_t>(config_.training.seed);
  info.training = true;
  info.sample_offset = first;
  info.loss_weight = loss_weight;  // known now: the LM head's forward also gives its gradient
  // Each micro-batch's losses stay on the device until every backward is queued: reading
  // them earlier would make the host wait for the GPU once per micro-batch.
  ModelStage stage(chunk_pointers(), batches, ModelStage::Mode::train, info, sequence_parts());
  if (pipelined()) {
    last_pipeline_step_ = pipeline_->train(schedule_, stage);
  } else {
    // One stage: forward then backward of each micro-batch.
    for (int m = 0; m < static_cast<int>(n_micro); ++m) {
      const DeviceTimestamp forward_start = record_timestamp(device_);
      stage.forward(m, 0, Tensor());
      forwards.emplace_back(forward_start, record_timestamp(device_));
      stage.backward(m, 0, Tensor());
    }
  }
  double loss_sum = sum_over_pipeline(stage.loss_sum());

  const DeviceTimestamp forward_backward_end = record_timestamp(device_);
  if (reducer_) loss_sum = all_reduce_double(groups_.data(), loss_sum);

  StepMetrics metrics;
  metrics.step = step;
  const DeviceMemoryStats memory = device_memory_stats(device_);
  metrics.activation_mb = static_cast<double>(memory.peak - resident) / 1e6;
  metrics.peak_memory_mb = static_cast<double>(memory.peak) / 1e6;
  metrics.reserved_memory_mb = static_cast<double>(memory.reserved) / 1e6;
  metrics.loss = valid_tokens > 0 ? loss_sum / static_cast<double>(valid_tokens) : 0.0;
  metrics.lr = learning_rate_at(config_.optimizer, step, config_.training.steps);
  reduce_partial_gradients();
  metrics.grad_norm = grad_norm();
  const DeviceTimestamp grad_sync_end = record_timestamp(device_);
  // The norm was read on the host: a communication failure in the step so far (NCCL's watchdog
  // aborts without blocking us) must stop the run before garbage gradients are applied.
  check_communication_health();
  metrics.skipped = !std::isfinite(metrics.grad_norm);
  if (!metrics.skipped) {
    optimizer_->step(static_cast<float>(metrics.lr),
                     clip_factor(metrics.grad_norm, config_.optimizer.grad_clip), ++updates_);
    if (reducer_ && reducer_->shards_optimizer_state()) reducer_->all_gather_parameters();
    after_master_update();
  }
  if (reducer_) {
    metrics.grad_reduce_wait_ms = reducer_->stats().exposed_wait_s * 1e3;
    metrics.buckets_reduced_early = reducer_->stats().buckets_started_early;
  }
  const DeviceTimestamp optimizer_end = record_timestamp(device_);
  device_synchronize(device_);  // the step's time includes its queued GPU work
  check_communication_health();  // before the step's metrics are logged or acted on
  metrics.forward_backward_ms = milliseconds_between(phases_start, forward_backward_end);
  if (!pipelined()) {
    double forward_ms = 0.0;
    for (const auto& [start, end] : forwards) forward_ms += milliseconds_between(start, end);
    metrics.forward_ms = forward_ms;
  }
  metrics.grad_sync_ms = milliseconds_between(forward_backward_end, grad_sync_end);
  metrics.optimizer_ms = milliseconds_between(grad_sync_end, optimizer_end);
  const double seconds = seconds_since(start);
  metrics.ms_per_step = seconds * 1e3;
  metrics.tokens_per_s =
      static_cast<double>(config_.training.global_batch_size * config_.model.seq_len) / seconds;
  metrics.tflops_per_rank = step_model_flops_ / seconds / groups_.world().size() / 1e12;
  if (config_.logging.peak_tflops > 0)
    metrics.mfu_percent = 100.0 * metrics.tflops_per_rank / config_.logging.peak_tflops;
  return metrics;
}

void Trainer::reduce_partial_gradients() {
  // The tied embedding's two copies, on the first and the last stage, each hold part of its
  // gradient (the lookup's and the LM head's): summed, both copies take the same update.
  auto tied_embedding_sums = [&] {
    if (!pipelined() || groups_.embedding() == nullptr || groups_.embedding()->size() < 2) return;
    for (auto& chunk : chunks_)
      if (chunk->tied_embedding() != nullptr)
        groups_.embedding()->all_reduce(chunk->tied_embedding()->grad, ReduceOp::Sum);
  };
  if (reducer_) {
    reducer_->finish(tied_embedding_sums);  // then the data-parallel sums complete
  } else {
    tied_embedding_sums();
  }
  // Sums commute, so the tensor-parallel partial sums can come last (on this rank's segments:
  // under ZeRO the rest of such a gradient is another data rank's to reduce).
  if (tp_.active())
    for (const ParameterSegment& s : segments_)
      if (s.param->tensor_parallel_partial_grad) {
        Tensor grad = s.grad();
        all_reduce_in_place(grad, tp_);
      }
}

double Trainer::grad_norm() {
  // Shards are summed over the tensor-parallel group; a replicated parameter is identical on
  // every rank of it, so only the group's rank 0 counts it. Stages hold different parameters
  // and are summed too, except the last stage's copy of the tied embedding.
  // Under ZeRO each data rank holds the reduced gradient of its own segments only, so they
  // are summed over the data-parallel group too.
  // One multi-tensor reduction: on a GPU the host waits once, not once per parameter.
  std::vector<Tensor> counted;
  for (const ParameterSegment& s : segments_) {
    const bool tied_copy =
        std::find(tied_copies_.begin(), tied_copies_.end(), s.param) != tied_copies_.end();
    if (!tied_copy && (s.param->is_sharded() || tp_.rank() == 0)) counted.push_back(s.grad());
  }
  double sum = 0.0;
  for (double squares : sums_of_squares(counted)) sum += squares;
  if (groups_.model_parallel().size() > 1) sum = all_reduce_double(groups_.model_parallel(), sum);
  if (reducer_ && reducer_->shards_optimizer_state()) sum = all_reduce_double(groups_.data(), sum);
  // A sum past f32's range is not finite where it is reduced in f32 parts: it counts so on
  // every layout, one rank's too, so that each skips the same steps.
  if (sum > std::numeric_limits<float>::max()) return std::numeric_limits<double>::infinity();
  return std::sqrt(sum);
}

bool Trainer::writes_output() const { return groups_.world().rank() == 0; }

std::vector<std::string> Trainer::input_files() const {
  std::vector<std::string> files = train_data_ ? train_data_->paths() : std::vector<std::string>();
  if (val_data_)
    for (const std::string& path : val_data_->paths()) files.push_back(path);
  return files;
}

double Trainer::evaluate() {
  TN_CHECK(val_sampler_.has_value(), "evaluation without data.val");
  const std::int64_t micro = config_.parallel.micro_batch_size;
  // The first eval_batches x global_batch_size windows, whatever the layout: each batch split
  // over the data-parallel replicas and into micro-batches as a training step's is.
  const std::int64_t global = config_.training.global_batch_size;
  const std::int64_t dp = reducer_ ? groups_.dp_size() : 1;
  const std::int64_t share = global / dp;
  const std::int64_t first = (reducer_ ? groups_.dp_rank() : 0) * share;
  double loss_sum = 0.0, valid_tokens = 0.0;
  std::vector<TokenBatch> batches;
  for (std::int64_t e = 0; e < config_.training.eval_batches; ++e)
    for (std::int64_t s = 0; s < share; s += micro) {
      const TokenBatch batch = val_sampler_->sequential(e * global + first + s, micro);
      valid_tokens += static_cast<double>(count_valid(batch.targets));
      batches.push_back(on_device(batch));
    }
  ModelStage stage(chunk_pointers(), batches, ModelStage::Mode::evaluate, MicroBatchInfo{},
                   sequence_parts());
  if (pipelined()) {
    pipeline_->forward_only(static_cast<int>(batches.size()), stage);
  } else {
    for (int m = 0; m < static_cast<int>(batches.size()); ++m) stage.forward(m, 0, Tensor());
  }
  loss_sum = sum_over_pipeline(stage.loss_sum());
  if (reducer_) {
    loss_sum = all_reduce_double(groups_.data(), loss_sum);
    valid_tokens = all_reduce_double(groups_.data(), valid_tokens);
  }
  check_communication_health();  // the losses were read on the host
  return valid_tokens > 0 ? loss_sum / valid_tokens : 0.0;
}

StepMetrics Trainer::run() {
  const TrainingConfig& t = config_.training;
  const CheckpointConfig& k = config_.checkpoint;
  const std::int64_t first_step = resumed_step_ + 1;
  if (resumed_step_ > 0) {
    log_info("ternion: resumed from ", resumed_from_, " after step ", resumed_step_, " (",
             resume_transfer_.str(), ")");
    if (writes_output())
      if (const std::string changes = resume_changes(resumed_from_, config_, resumed_step_);
          !changes.empty())
        log_info("ternion: resumed with settings other than the saved run's: ", changes);
  }
  if (first_step > t.steps) {
    log_info("ternion: nothing to train: the checkpoint is at step ", resumed_step_,
             " and training.steps is ", t.steps);
    return StepMetrics{};
  }
  MetricsWriter metrics_writer(writes_output() ? config_.logging.metrics_file : "",
                               resumed_step_);
  StepMetrics last;
  double peak_activation_mb = 0.0;
  std::int64_t skipped_in_a_row = 0, skipped = 0;
  const auto start = Clock::now();
  const StopSignals signals(!k.save_dir.empty());
  for (std::int64_t step = first_step; step <= t.steps; ++step) {
    StepMetrics m;
    try {
      m = train_step(step);
    } catch (const MemoryError& e) {
      // What the memory was for: a step's activations, which these keys size.
      TN_THROW(MemoryError, "step ", step, ": ", e.what(), " (a step's activations grow with "
               "parallel.micro_batch_size, ", config_.parallel.micro_batch_size,
               ", and model.seq_len, ", config_.model.seq_len, ": lower them)");
    }
    if (step == first_step && memory_estimate_) {
      m.memory_estimate_mb = static_cast<double>(*memory_estimate_) / 1e6;
      log_memory_against_estimate(m);
    }
    const std::int64_t traced =
        config_.logging.trace_step > 0 ? config_.logging.trace_step : t.steps;
    if (!config_.logging.trace_file.empty() && step == traced) trace_last_step(step);
    if (t.eval_interval > 0 && (step % t.eval_interval == 0 || step == t.steps))
      m.val_loss = evaluate();
    metrics_writer.write(m);
    if (step % config_.logging.log_interval == 0 || step == t.steps || m.val_loss || m.skipped) {
      const double elapsed = seconds_since(start);
      const double done = static_cast<double>(step - first_step + 1);
      const double eta = elapsed / done * static_cast<double>(t.steps - step);
      char mfu[32] = "";
      if (m.mfu_percent) std::snprintf(mfu, sizeof mfu, " | MFU %.1f%%", *m.mfu_percent);
      char line[320];
      std::snprintf(line, sizeof line,
                    "step %5lld/%lld | loss %.4f | lr %.2e | grad norm %7.4f | %8.0f tok/s | "
                    "%.3g TFLOP/s per rank%s | %7.1f ms/step | ETA %s",
                    static_cast<long long>(step), static_cast<long long>(t.steps), m.loss, m.lr,
                    m.grad_norm, m.tokens_per_s, m.tflops_per_rank, mfu, m.ms_per_step,
                    format_duration(eta).c_str());
      std::string text = line;
      if (m.val_loss) text += detail::concat(" | val loss ", *m.val_loss);
      if (m.skipped) text += " | SKIPPED: non-finite gradients, no update applied";
      log_info(text);
    }
    // The final sample is the caller's, after the last checkpoint.
    if (t.sample_tokens > 0 && t.sample_interval > 0 && step % t.sample_interval == 0 &&
        step < t.steps)
      log_sample(detail::concat("step ", step, " "));
    last = m;
    peak_activation_mb = std::max(peak_activation_mb, m.activation_mb);
    // A skipped step keeps the weights, so a passing spike costs one step; a run whose
    // gradients stay non-finite has diverged (or never could train: an absurd learning rate),
    // and would otherwise spend its allocation skipping and exit as if it had trained. Every
    // rank sees the same global norm, so all stop at the same step.
    skipped_in_a_row = m.skipped ? skipped_in_a_row + 1 : 0;
    skipped += m.skipped ? 1 : 0;
    TN_CHECK_AS(TrainingError, skipped_in_a_row < kMaxSkippedStepsInARow, "steps ",
                step - skipped_in_a_row + 1, " to ", step,
                " all had non-finite gradients (none was applied): the run has diverged; "
                "resume from an earlier checkpoint with a lower optimizer.lr, or check the data");
    // Every rank stops together: a signal to any of them is a signal to all, and the time
    // limit one rank has passed is passed (ranks read their clocks at different moments).
    const bool out_of_time =
        t.time_limit_minutes > 0 && seconds_since(started_) >= t.time_limit_minutes * 60.0;
    Tensor flag = Tensor::from_vector({out_of_time        ? kStopForTime
                                       : g_stop_requested ? kStopForSignal
                                                          : 0.0f},
                                      {1});
    groups_.world().all_reduce(flag, ReduceOp::Max);
    const float stop = flag.data<float>()[0];
    const bool save_now = !k.save_dir.empty() &&
                          ((k.save_interval > 0 && step % k.save_interval == 0) ||
                           step == t.steps || stop > 0);
    if (save_now) {
      const CheckpointTransfer saved = save_checkpoint(step);
      log_info("ternion: saved the checkpoint of step ", step, " in ", k.save_dir, " (",
               saved.str(), ")",
               m.skipped ? " (this step was skipped: the weights are the last applied step's)"
                         : "");
    }
    // A signal in the last step stops nothing: the run has finished.
    if (stop > 0 && step < t.steps) {
      if (stop == kStopForTime)
        log_info("ternion: stopped after step ", step, ": training.time_limit_minutes (",
                 detail::concat(t.time_limit_minutes), ") has passed");
      else
        log_info("ternion: stopped by a signal after step ", step);
      stopped_early_ = true;
      break;
    }
  }
  metrics_writer.finish();
  // Skipped steps leave no trace in the loss curve's shape: say so where a user looks last.
  if (skipped > 0)
    log_info("ternion: warning: ", skipped, " of ", last.step - first_step + 1,
             " steps were skipped (non-finite gradients, no update applied)",
             last.skipped ? ", the last among them: the run may be diverging" : "");
  if (!device_.is_cpu()) {
    const DeviceMemoryStats memory = device_memory_stats(device_);
    log_info("ternion: ", device_.str(), " memory peaked at ",
             static_cast<long long>(memory.peak / 1000000), " MB allocated, ",
             static_cast<long long>(memory.reserved / 1000000), " MB reserved");
  }
  log_info("ternion: activations and temporaries peaked at ",
           detail::concat(static_cast<long long>(peak_activation_mb * 10 + 0.5) / 10.0),
           " MB per step", groups_.world().size() > 1 ? " per rank" : "");
  log_info("ternion: gradients held ", human_bytes(static_cast<double>(gradient_bytes())),
           " through the step, at most ", human_bytes(static_cast<double>(peak_gradient_bytes())),
           " at once", groups_.world().size() > 1 ? " per rank" : "");
  return last;
}

SampleOptions Trainer::sample_options() const {
  const TrainingConfig& t = config_.training;
  SampleOptions sample;
  sample.prompt = t.sample_prompt;
  sample.max_tokens = t.sample_tokens;
  sample.temperature = t.sample_temperature;
  sample.top_k = t.sample_top_k;
  sample.top_p = t.sample_top_p;
  sample.seed = static_cast<std::uint64_t>(t.seed);
  sample.tokenizer = tokenizer_;
  sample.stop_token = tokenizer_.end_of_text_id();  // as ternion-generate stops
  return sample;
}

void Trainer::log_sample(const std::string& heading) {
  const SampleOptions sample = sample_options();
  const std::string text = generate(sample);  // every rank: it communicates
  std::ostringstream settings;
  settings << "temperature " << sample.temperature << ", top-k " << sample.top_k;
  if (sample.top_p < 1) settings << ", top-p " << sample.top_p;
  log_info("ternion: ", heading, "sample (", settings.str(), "):\n", sample.prompt, text);
}

std::string Trainer::generate(const SampleOptions& options) {
  const std::int64_t parts = config_.parallel.sequence_parallel ? tp_.size() : 1;
  // Sampling runs windows of every length up to the context: under `auto` they take the cuBLAS
  // path rather than have cuDNN build a graph for each length.
  const AttentionKernel kernel = attention_kernel();
  const AttentionKernelScope scope(kernel == AttentionKernel::automatic ? AttentionKernel::cublas
                                                                        : kernel);
  return generate_text(config_.model, options, parts,
                       [this](const Tensor& tokens) { return full_logits(tokens); });
}

void Trainer::log_memory_against_estimate(const StepMetrics& first) {
  Communicator& world = groups_.world();
  Tensor mine = Tensor::from_vector(
      {static_cast<float>(first.peak_memory_mb), static_cast<float>(*first.memory_estimate_mb)},
      {2});
  Tensor all = Tensor::empty({2 * static_cast<std::int64_t>(world.size())});
  world.all_gather(all, mine);
  const float* v = all.data<float>();
  for (int r = 0; r < world.size(); ++r) {
    const double measured = v[2 * r], estimated = v[2 * r + 1];
    const double off = measured > 0 ? (estimated - measured) / measured * 100.0 : 0.0;
    char line[160];
    std::snprintf(line, sizeof line, ": step %lld peaked at %.1f MB, estimated %.1f MB (%+.1f%%)",
                  static_cast<long long>(first.step), measured, estimated, off);
    log_info("ternion: memory", world.size() > 1 ? detail::concat(" rank ", r) : std::string(),
             line);
  }
}

void Trainer::trace_last_step(std::int64_t step) {
  const ParallelConfig& p = config_.parallel;
  const int micro_batches =
      static_cast<int>(config_.micro_batches_per_step(groups_.world().size()));
  const TracedStep traced = write_pipeline_trace(config_.logging.trace_file, last_pipeline_step_,
                                                 groups_, step, micro_batches);
  if (traced.stage_costs.empty()) return;  // not rank 0
  // What the schedule alone leaves idle: simulated with a forward, an input gradient and a
  // weight gradient of equal cost (for 1F1B and interleaving (p - 1) / v / (m + (p - 1) / v)),
  // and with the step's own per-stage times (sends and receives taking none).
  const auto lists = pipeline_schedules(p.pipeline_schedule(), groups_.pp_size(), micro_batches,
                                        static_cast<int>(p.virtual_stages));
  const int v = static_cast<int>(p.virtual_stages);
  const PipelineSimulation ideal = simulate_pipeline_actions(lists, v);
  const PipelineSimulation timed = simulate_pipeline_actions(lists, v, traced.stage_costs, 0.0);
  auto percent = [](double fraction) { return std::round(fraction * 1000) / 10; };
  auto ms = [](double seconds) { return std::round(seconds * 1e5) / 100; };
  const bool split = p.pipeline_schedule() == PipelineSchedule::ZeroBubbleH1;
  std::string costs;
  for (const StageCost& c : traced.stage_costs)
    costs += detail::concat(costs.empty() ? "" : ", ", ms(c.forward), "/", ms(c.backward),
                            split ? detail::concat(" (W ", percent(c.weight_share), "%)") : "");
  log_info("ternion: step ", step, " traced to ", config_.logging.trace_file,
           ": measured pipeline bubble ", percent(traced.bubble), "% of the ranks' time; the ",
           pipeline_schedule_name(p.pipeline_schedule()), " schedule's own: ",
           percent(ideal.bubble_fraction),
           "% with equal forward, input- and weight-gradient times, ",
           percent(timed.bubble_fraction),
           "% with this step's (forward/backward ms per micro-batch, stage by stage: ", costs,
           ")");
}

Tensor Trainer::full_logits(const Tensor& tokens) {
  // Sampling reads the logits on the host, in f32 (and only once no communication has failed).
  auto on_host = [](const Tensor& logits) {
    Tensor host = as_f32(logits).to(Device::cpu());
    check_communication_health();
    return host;
  };
  const std::vector<TokenBatch> batch{{tokens.to(device_), Tensor()}};
  ModelStage stage(chunk_pointers(), batch, ModelStage::Mode::logits, MicroBatchInfo{},
                   sequence_parts());
  if (!pipelined()) {
    stage.forward(0, 0, Tensor());
    return on_host(stage.logits());
  }
  // The last stage computes them; every stage samples the same token from them.
  pipeline_->forward_only(1, stage);
  Tensor logits = stage.logits();
  logits = logits.defined() ? on_host(logits)
                            : Tensor::empty({tokens.size(0), tokens.size(1),
                                             config_.model.padded_vocab_size()});
  groups_.pipeline().broadcast(logits, groups_.pp_size() - 1);
  return logits;
}

std::string format_duration(double seconds) {
  const auto total = static_cast<long long>(std::max(0.0, seconds) + 0.5);
  char out[32];
  if (total >= 3600)
    std::snprintf(out, sizeof out, "%lld:%02lld:%02lld", total / 3600, total / 60 % 60, total % 60);
  else
    std::snprintf(out, sizeof out, "%lld:%02lld", total / 60, total % 60);
  return out;
}

}  // namespace ternion
