#include "training/train_cli.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "framework/crc32.h"
#include "framework/device_runtime.h"
#include "framework/logging.h"
#include "framework/output_path.h"
#include "kernels/blas_check.h"
#include "kernels/threads.h"
#include "layers/model_facts.h"
#include "layers/model_family.h"
#include "optimizers/lr_schedule.h"
#include "parallel/comm/comm_backend.h"
#include "parallel/comm/comm_watchdog.h"
#include "parallel/comm/fault_injection.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/process_groups.h"
#include "training/checkpoint.h"
#include "training/cli_option_values.h"
#include "training/data_summary.h"
#include "training/memory_estimate.h"
#include "training/run_outputs.h"
#include "training/trainer.h"

// Several ranks run this same program on the same arguments and config (under mpirun, see
// launch/ternion-run). They must fail alike and never leave one another waiting in a
// collective, so the work goes in phases:
//   1. setup: parse the command line, read and validate the config against the world size;
//   2. local checks: open the data on every rank;
//   3. collective work: build the process groups, train.
// Phases 1 and 2 touch no communicator; each ends with an agreement (one all-gather of every
// rank's exit status): when all ranks failed alike, rank 0 prints the message once and all
// exit with its status (MPI finalises normally); when only some failed, each of those prints
// its own message with its rank and all exit with the first failed rank's status (mpirun
// passes on whichever rank exits first). After phase 1 the ranks also agree that they run
// the same command and the same config. An error inside phase 3 may leave other ranks inside
// a collective, so with more than one rank it ends the job (abort_job).
// On one rank all of this reduces to what ternion-train always did: one line, one status.

namespace ternion {

namespace {

// The program's name in messages and usage: ternion-train, or a program built on train_main
// (the custom-block example), as it was started.
std::string g_program = "ternion-train";
// When train_main began: training.time_limit_minutes counts MPI's and NCCL's start-up too.
std::chrono::steady_clock::time_point g_program_start = std::chrono::steady_clock::now();

constexpr const char* kUsage =
    "usage: ternion-train --config FILE [--set section.key=value ...] [--dry-run | --eval-only]\n"
    "       ternion-train [--config FILE] [--set section.key=value ...] --print-config\n"
    "  --config FILE     YAML config (sections model, parallel, training, optimizer, data, "
    "logging, checkpoint)\n"
    "  --set S.K=V       override one key, e.g. --set training.steps=10 (repeatable, the\n"
    "                    last --set of a key wins); a string key takes V as typed, spaces,\n"
    "                    '#' and ':' included\n"
    "  --dry-run         validate the config and data, build the model, print its size, exit;\n"
    "                    under mpirun: check the parallel layout on the job's ranks and print\n"
    "                    each rank's groups and parameter count\n"
    "  --eval-only       evaluate the model (checkpoint.load, model.init_from, or a new one) on\n"
    "                    training.eval_batches batches of data.val, print the loss and its\n"
    "                    perplexity, exit; any layout; nothing is trained or saved\n"
    "  --print-config    print every key with its default and meaning; with --config or\n"
    "                    --set, the resolved config (checked, as a config file), and exit\n"
    "  --print-layout    print 'tensor T pipeline P data D' from the config's parallel section\n"
    "                    and exit (launch/ternion-run reads it to size the job)\n";

// kUsage under the program's name.
std::string usage_text() {
  std::string text = kUsage;
  for (auto at = text.find("ternion-train"); at != std::string::npos;
       at = text.find("ternion-train", at + g_program.size()))
    text.replace(at, std::string("ternion-train").size(), g_program);
  return text;
}

struct CliOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  bool dry_run = false;
  bool eval_only = false;
  bool print_config = false;
  bool print_layout = false;
  bool help = false;
};

CliOptions parse_args(int argc, char** argv) {
  CliOptions options;
  bool config_given = false;
  CliOptionValues values({"--config", "--set", "--dry-run", "--eval-only", "--print-config",
                          "--print-layout", "--help", "-h"},
                         {"--config", "--set"});  // --config twice is refused below, naming both
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return values.take(argc, argv, i); };
    if (arg == "--config" || arg.rfind("--config=", 0) == 0) {
      std::string path = arg == "--config" ? value() : arg.substr(9);
      TN_CHECK_AS(UsageError, !config_given, "--config given twice ('", options.config_path,
                  "', then '", path, "'): give one config and override its keys with --set");
      options.config_path = std::move(path);
      config_given = true;
    } else if (arg == "--set") {
      options.overrides.push_back(value());
    } else if (arg.rfind("--set=", 0) == 0) {
      options.overrides.push_back(arg.substr(6));
    } else if (arg == "--dry-run") {
      options.dry_run = true;
    } else if (arg == "--eval-only") {
      options.eval_only = true;
    } else if (arg == "--print-config") {
      options.print_config = true;
    } else if (arg == "--print-layout") {
      options.print_layout = true;
    } else if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else {
      TN_THROW(UsageError, "unknown argument '", arg, "'");
    }
  }
  TN_CHECK_AS(
      UsageError,
      int{options.dry_run} + options.eval_only + options.print_config + options.print_layout <= 1,
      "--dry-run, --eval-only, --print-config and --print-layout each say what to do: "
      "give one");
  if (!options.help && !options.print_config)
    TN_CHECK_AS(UsageError, !options.config_path.empty(), "--config FILE is required");
  return options;
}



// ---- failures as exit statuses ------------------------------------------------------------

// What went wrong on this rank: the text for stderr and the exit status.
struct Failure {
  int status = 1;
  std::string text;
};

// The one translation of an exception into a message and a status.
Failure failure_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const UsageError& e) {
    return {2, g_program + ": error: " + e.what() + "\nrun '" + g_program +
                   " --help' for usage\n"};
  } catch (const Error& e) {
    return {1, g_program + (e.is_user_error() ? ": error: " : ": internal error: ") + e.what() +
                   "\n"};
  } catch (const std::bad_alloc&) {
    return {1, g_program + ": error: out of memory\n"};
  } catch (const std::exception& e) {
    return {1, g_program + ": internal error: " + e.what() + "\n"};
  }
}

std::optional<Failure> capture(const std::function<void()>& work) {
  try {
    work();
    return std::nullopt;
  } catch (...) {
    return failure_of(std::current_exception());
  }
}

// Every rank calls this with its own outcome of the same phase; returns the exit status when
// any rank failed (printing the messages as described at the top), nothing when all went on.
std::optional<int> agree_on_failure(Communicator& world, const std::optional<Failure>& mine) {
  if (world.size() == 1) {
    if (!mine) return std::nullopt;
    std::fputs(mine->text.c_str(), stderr);
    return mine->status;
  }
  Tensor my_status = Tensor::full({1}, mine ? static_cast<float>(mine->status) : 0.0f);
  Tensor statuses = Tensor::empty({world.size()});
  world.all_gather(statuses, my_status);
  std::vector<int> failed_ranks;
  for (int r = 0; r < world.size(); ++r)
    if (statuses.data<float>()[r] != 0.0f) failed_ranks.push_back(r);
  if (failed_ranks.empty()) return std::nullopt;
  const int status = static_cast<int>(statuses.data<float>()[failed_ranks.front()]);
  if (static_cast<int>(failed_ranks.size()) == world.size()) {
    if (world.rank() == 0) std::fputs(mine->text.c_str(), stderr);
  } else {
    // Only some ranks failed, so the ranks saw different inputs (a file one node cannot read,
    // say): every failed rank says what it saw.
    if (mine) std::fprintf(stderr, "[rank %d] %s", world.rank(), mine->text.c_str());
    if (world.rank() == 0)
      std::fprintf(stderr,
                   "%s: error: %zu of %d ranks failed (ranks %s); each printed its "
                   "message\n",
                   g_program.c_str(), failed_ranks.size(), world.size(),
                   rank_list_str(failed_ranks).c_str());
  }
  std::fflush(stderr);
  // No rank exits before the messages are out: mpirun ends the whole job when the first rank
  // exits with a non-zero status.
  world.barrier();
  return status;
}

// Ranks that resolved different configs (an MPMD job, a file edited while the job started)
// would part ways in some later collective and hang there: each rank compares a checksum of
// its resolved config with rank 0's first, and the ranks agree on the outcome.
std::optional<int> agree_on_config(Communicator& world, const TrainConfig& config) {
  const std::string text = config_yaml(config);
  const std::uint32_t sum = crc32(text.data(), text.size());
  // F32 collectives carry integers exactly below 2^24: the checksum goes in two halves.
  const float high = static_cast<float>(sum >> 16), low = static_cast<float>(sum & 0xFFFFu);
  Tensor rank0 = Tensor::from_vector({high, low}, {2});
  world.broadcast(rank0, 0);
  std::optional<Failure> mine;
  if (rank0.data<float>()[0] != high || rank0.data<float>()[1] != low)
    mine = Failure{1, g_program + ": error: this rank resolved a config other than rank 0's (" +
                          config.source +
                          " and its --set arguments): every rank must run the same config\n"};
  return agree_on_failure(world, mine);
}

// What a rank was started to do, named as its command line says it.
std::string_view command_name(const CliOptions& options) {
  if (options.help) return "--help";
  if (options.print_config) return "--print-config";
  if (options.print_layout) return "--print-layout";
  if (options.dry_run) return "--dry-run";
  if (options.eval_only) return "--eval-only";
  return "training (no --dry-run, --eval-only, --print-config, --print-layout or --help)";
}

// Ranks started to do different things (an MPMD job with --dry-run on some ranks) would wait
// for each other in different collectives: they agree on the command first, as on the config.
std::optional<int> agree_on_command(Communicator& world, const CliOptions& options) {
  const float code = static_cast<float>(int{options.help} * 1 + int{options.print_config} * 2 +
                                        int{options.print_layout} * 4 + int{options.dry_run} * 8 +
                                        int{options.eval_only} * 16);
  Tensor rank0 = Tensor::full({1}, code);
  world.broadcast(rank0, 0);
  std::optional<Failure> mine;
  if (rank0.data<float>()[0] != code) {
    const int bits = static_cast<int>(rank0.data<float>()[0]);
    CliOptions first;
    first.help = (bits & 1) != 0;
    first.print_config = (bits & 2) != 0;
    first.print_layout = (bits & 4) != 0;
    first.dry_run = (bits & 8) != 0;
    first.eval_only = (bits & 16) != 0;
    mine = Failure{2, g_program + ": error: this rank was started for " +
                          std::string(command_name(options)) + ", rank 0 for " +
                          std::string(command_name(first)) +
                          ": every rank must run the same command\n"};
  }
  return agree_on_failure(world, mine);
}

// ---- the runs -----------------------------------------------------------------------------

struct Setup {
  CliOptions options;
  ConfigDocument doc;  // the file with the overrides applied, for messages naming keys
  std::optional<TrainConfig> config;
  bool finished = false;  // --help, --print-config, --print-layout: nothing more to do
  std::string output;     // what such a command prints on rank 0, once the ranks agree on it
};


// A lower bound of what one CPU rank needs, against this machine's memory, so that a config
// that cannot fit stops at start-up (and in --dry-run) with its numbers rather than failing
// an allocation mid-step: one micro-batch's logits (f32, this rank's vocabulary shard) and
// the rank's weights with their gradients and AdamW's two moments.
// Activations come on top; the run logs their measured peak.
void check_host_memory(const ConfigDocument& doc, const TrainConfig& config, int world_size) {
  if (config.training.device != "cpu") return;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;
  const double machine = static_cast<double>(pages) * static_cast<double>(page);
  const ParallelConfig& p = config.parallel;
  const double logits = 4.0 * static_cast<double>(p.micro_batch_size) *
                        static_cast<double>(config.model.seq_len) *
                        static_cast<double>(config.model.padded_vocab_size()) /
                        static_cast<double>(p.tensor);
  const RankLayout layout =
      make_rank_layout(world_size, p.tensor, p.pipeline, p.data_size(world_size));
  const double state =
      16.0 * static_cast<double>(parameters_on_rank(config.model, layout, 0, p.virtual_stages));
  // One rank's need: the machine may hold other ranks too, so this is the least that fails.
  const double need = logits + state;
  if (need > machine)
    config_fail(doc, "parallel", "micro_batch_size",
                "a rank needs at least " + human_bytes(need) + " of memory (a micro-batch's "
                    "logits " + human_bytes(logits) + ", weights, gradients and AdamW state " +
                    human_bytes(state) + "), more than this machine's " + human_bytes(machine) +
                    ": lower parallel.micro_batch_size or the model's size");
}

// With training.threads 0, OpenMP takes OMP_NUM_THREADS: checked as the key would be, before
// the first parallel region (libgomp warns and goes on where it cannot read it, and crashes
// where it cannot start that many threads).
void check_omp_num_threads(const TrainConfig& config) {
  const char* text = std::getenv("OMP_NUM_THREADS");
  if (config.training.threads > 0 || text == nullptr) return;
  const std::string value = text;
  const std::string first = value.substr(0, value.find(','));  // a nested list: the outer level
  std::int64_t threads = 0;
  const auto [end, error] = std::from_chars(first.data(), first.data() + first.size(), threads);
  const bool whole = error == std::errc() && end == first.data() + first.size();
  TN_CHECK_AS(ConfigError, whole && threads >= 1, "OMP_NUM_THREADS '", value,
              "' is not a positive whole number (training.threads 0 "
              "takes it)");
  const auto cores = static_cast<std::int64_t>(std::thread::hardware_concurrency());
  TN_CHECK_AS(ConfigError, cores == 0 || threads <= cores, "OMP_NUM_THREADS ", threads,
              " is more than this machine's ", cores, " cores (training.threads 0 takes it)");
}

// --eval-only trains and writes nothing: what a training run reads, writes, samples or times is
// left out of the config its trainer is built from, and checkpoint.load: latest is resolved
// here, where finding no checkpoint is an error (training would start afresh).
void config_for_evaluation(TrainConfig& c) {
  c.data.train.clear();
  // Without a checkpoint, model.init_from's weights are evaluated, as a run would start.
  if (c.checkpoint.load == "latest") {
    try {
      c.checkpoint.load = resolve_checkpoint("latest", c.checkpoint.save_dir);
    } catch (const CheckpointError& e) {
      if (c.model.init_from.empty())
        TN_THROW(CheckpointError, "--eval-only: ", e.what(), ": there is no model to evaluate");
      c.checkpoint.load.clear();
    }
  }
  c.checkpoint.save_dir.clear();
  c.checkpoint.save_interval = 0;
  c.logging.metrics_file.clear();
  c.logging.trace_file.clear();
  c.logging.trace_step = 0;
  c.training.time_limit_minutes = 0;
  c.training.sample_tokens = 0;
  c.training.sample_interval = 0;
}

// Phase 1. Identical on every rank; what is to be printed waits in s.output.
void read_setup(Setup& s, int argc, char** argv, int world_size) {
  s.options = parse_args(argc, argv);
  const bool resolves_config = !s.options.config_path.empty() || !s.options.overrides.empty();
  if (s.options.help || (s.options.print_config && !resolves_config)) {
    std::ostringstream out;
    if (s.options.help) out << usage_text();
    else print_config_schema(out);
    s.output = out.str();
    s.finished = true;
    return;
  }
  s.doc = s.options.config_path.empty() ? ConfigDocument::parse("", "(defaults)")
                                        : ConfigDocument::load_file(s.options.config_path);
  for (const std::string& assignment : s.options.overrides) s.doc.apply_override(assignment);
  if (s.options.print_layout || s.options.print_config) {
    ParallelConfig parallel;
    read_config_section(s.doc, "parallel", parallel);
    // Launchers start this many ranks: the whole config is checked first, for the world the
    // layout makes (one data rank where parallel.data is 0, to be derived), so that a layout
    // mpirun cannot start, or a config that would fail on every rank, stops here.
    constexpr std::int64_t kMaxLayoutSize = std::int64_t{1} << 24;  // ranks
    const std::int64_t world = saturating_product(
        saturating_product(std::max<std::int64_t>(parallel.tensor, 1),
                           std::max<std::int64_t>(parallel.pipeline, 1)),
        std::max<std::int64_t>(parallel.data, 1));
    if (world > kMaxLayoutSize) {
      const char* largest = parallel.tensor >= parallel.pipeline
                                ? (parallel.tensor >= parallel.data ? "tensor" : "data")
                                : (parallel.pipeline >= parallel.data ? "pipeline" : "data");
      config_fail(s.doc, "parallel", largest,
                  "tensor (" + std::to_string(parallel.tensor) + ") x pipeline (" +
                      std::to_string(parallel.pipeline) + ") x data (" +
                      std::to_string(parallel.data) + ") is more than 2^24 ranks");
    }
    const TrainConfig config = TrainConfig::from_document(s.doc, {}, world);
    if (s.options.print_config) s.output = config_yaml(config);
    if (s.options.print_layout)
      s.output = detail::concat("tensor ", parallel.tensor, " pipeline ", parallel.pipeline,
                                " data ", parallel.data, "\n");
    s.finished = true;
    return;
  }
  s.config = TrainConfig::from_document(
      s.doc, {}, world_size,
      s.options.eval_only ? TrainConfig::Purpose::evaluation : TrainConfig::Purpose::training);
  if (s.options.eval_only) config_for_evaluation(*s.config);
  check_omp_num_threads(*s.config);
  check_host_memory(s.doc, *s.config, world_size);
}

// The model's shape, size and forward FLOPs per token (a training step's are 3x: the figure
// each step's TFLOP/s and MFU are quoted against).
std::string model_line(const ModelConfig& m, std::int64_t params) {
  const std::string kv_heads =
      m.kv_heads() != m.n_head ? detail::concat(" (", m.kv_heads(), " key/value)") : "";
  // A block type of the user's is named: its layers are not the family's own.
  const std::string block = m.block != "transformer" ? " (block " + m.block + ")" : "";
  return detail::concat("ternion: ", m.family, " ", m.n_layer, " layers", block, " x ", m.d_model,
                        " wide, ",
                        m.n_head, " heads", kv_heads, ", vocab ", m.vocab_size, " (padded ",
                        m.padded_vocab_size(), "), context ", m.seq_len, ": ",
                        human_count(static_cast<double>(params)), " parameters (", params,
                        "), ", forward_flops_per_token(m), " forward FLOPs per token");
}

// What each rank built, gathered to rank 0 and logged one line a rank: the proof that the
// layout ran (a rank that built the whole model where it should hold a shard shows here, and
// tests compare these lines with --dry-run's per-rank counts). Counts travel as two F32
// halves of 24 bits, exact below 2^48.
void log_built_parameters(Communicator& world, const ProcessGroups& groups, std::int64_t count) {
  constexpr std::int64_t kHalf = std::int64_t{1} << 24;
  Tensor mine = Tensor::from_vector({static_cast<float>(count / kHalf),
                                     static_cast<float>(count % kHalf)}, {2});
  Tensor all = Tensor::empty({2 * static_cast<std::int64_t>(world.size())});
  world.all_gather(all, mine);
  const float* v = all.data<float>();
  for (int r = 0; r < world.size(); ++r) {
    const RankCoords c = groups.layout().at(r).coords;
    const auto built =
        static_cast<std::int64_t>(v[2 * r]) * kHalf + static_cast<std::int64_t>(v[2 * r + 1]);
    log_info("ternion: rank ", r, " tp=", c.tp_rank, " pp=", c.pp_rank, " dp=", c.dp_rank,
             " built ", built, " parameters");
  }
}

// What each rank may use: its device's memory, shared by the ranks on it (a node's CPU by all
// of the node's ranks, a GPU by the ranks given it).
double memory_per_rank(Device device, int ranks_on_node) {
  const double total = static_cast<double>(device_total_memory(device));
  if (device.is_cpu()) return total / ranks_on_node;
  const int gpus = std::max(1, cuda_device_count());
  return total / std::max(1, (ranks_on_node + gpus - 1) / gpus);
}

// Every rank's estimated peak (training/memory_estimate.h), gathered; rank 0 warns of each
// rank whose estimate exceeds its share of its device. Collective.
std::vector<double> gather_memory_estimates(Communicator& world, double mine, double available) {
  Tensor one = Tensor::from_vector({static_cast<float>(mine / 1e6)}, {1});
  Tensor all = Tensor::empty({world.size()});
  world.all_gather(all, one);
  std::vector<double> estimates;
  for (float mb : all.to_vector()) estimates.push_back(static_cast<double>(mb) * 1e6);
  for (int r = 0; r < world.size(); ++r) {
    const double need = estimates[static_cast<std::size_t>(r)];
    if (available > 0 && need > available)
      log_info("ternion: warning: ",
               world.size() > 1 ? detail::concat("rank ", r, " is") : "this run is",
               " estimated to need ", human_bytes(need), " at its peak, more than the ",
               human_bytes(available),
               " of memory it has: expect it to run out (lower "
               "parallel.micro_batch_size, or set training.recompute, parallel.zero_stage, or "
               "more pipeline or tensor ranks; --dry-run shows where the memory goes)");
  }
  return estimates;
}

// --eval-only: the loss of the model the trainer built (loaded, imported or new) on data.val.
int evaluate_only(Trainer& trainer) {
  const TrainConfig& config = trainer.config();
  const double loss = trainer.evaluate();
  std::string model = "a new model (no checkpoint.load or model.init_from)";
  if (trainer.resumed_step() > 0)
    model = detail::concat("the checkpoint of step ", trainer.resumed_step());
  else if (!config.model.init_from.empty())
    model = "'" + config.model.init_from + "'";
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "val loss %.6f, perplexity %.4g", loss, std::exp(loss));
  log_info("ternion: evaluation of ", model, " on ",
           config.training.eval_batches * config.training.global_batch_size, " sequences of ",
           config.model.seq_len, " tokens of data.val: ", numbers);
  return 0;
}

// Trains (or, on one rank with --dry-run, stops after building the model). On several ranks
// the process groups come first (collective), then each rank builds its trainer (local: it
// opens the data), and the ranks agree on failures before training starts.
int run_training(Communicator& world, const Setup& s) {
  const TrainConfig& config = *s.config;
  const ParallelConfig& parallel = config.parallel;
  // CUDA ranks bind their GPU (node-local rank % GPUs) before any NCCL communicator exists;
  // with parallel.backend nccl the process groups split a world that sends CUDA tensors
  // through NCCL and CPU tensors through MPI. Each phase ends with the ranks agreeing, so a
  // rank without a GPU fails the job instead of leaving the others in a collective.
  std::unique_ptr<Communicator> device_world;
  if (config.training.device == "cuda") {
    // Named apart from the process groups' "node": the hang report tells groups by name.
    const std::unique_ptr<Communicator> node = world.split_node_local("gpu_binding");
    const std::optional<Failure> bound = capture([&] { init_cuda_device(node->rank()); });
    if (const std::optional<int> status = agree_on_failure(world, bound)) return *status;
    const CommBackend backend = parallel.comm_backend(/*cuda_tensors=*/true);
    if (world.size() > 1 && backend != CommBackend::Mpi) {
      const std::optional<Failure> made =
          capture([&] { device_world = make_world_communicator(backend); });
      if (const std::optional<int> status = agree_on_failure(world, made)) return *status;
    }
  }
  Communicator& group_world = device_world != nullptr ? *device_world : world;
  std::unique_ptr<ProcessGroups> groups;
  if (world.size() > 1)
    groups = std::make_unique<ProcessGroups>(
        group_world,
        make_rank_layout(world.size(), parallel.tensor, parallel.pipeline, parallel.data));
  std::unique_ptr<Trainer> trainer;
  const std::optional<Failure> built =
      capture([&] { trainer = std::make_unique<Trainer>(config, groups.get()); });
  if (const std::optional<int> status = agree_on_failure(world, built)) return *status;

  // The estimate is a training step's (run on the meta device), which --eval-only never takes.
  std::optional<MemoryEstimate> estimate;
  const RankLayout one_rank = make_rank_layout(1, 1, 1, 1);
  if (!s.options.eval_only) {
    const std::optional<Failure> estimated = capture([&] {
      estimate = estimate_memory(config, groups ? groups->layout() : one_rank, world.rank());
    });
    if (const std::optional<int> status = agree_on_failure(world, estimated)) return *status;
    const int ranks_on_node = groups ? groups->node_local().size() : 1;
    gather_memory_estimates(world, static_cast<double>(estimate->peak()),
                            memory_per_rank(trainer->device(), ranks_on_node));
    trainer->set_memory_estimate(estimate->peak());
  }
  trainer->set_time_limit_start(g_program_start);

  const std::int64_t params = parameters_on_rank(config.model, one_rank, 0);  // the whole model
  log_info(model_line(config.model, params));
  std::string layout;
  if (world.size() > 1) {
    layout = detail::concat(", layout tensor ", parallel.tensor, " x pipeline ", parallel.pipeline,
                            " x data ", parallel.data_size(world.size()));
    // Settings the layout leaves nothing to do are named as such, not as if they ran.
    if (parallel.sequence_parallel)
      layout +=
          parallel.tensor > 1 ? ", sequence parallel" : ", sequence parallel (no effect: tensor 1)";
    if (parallel.pipeline > 1)
      layout += parallel.virtual_stages > 1
                    ? detail::concat(", interleaved 1F1B with ", parallel.virtual_stages, " chunks")
                    : ", " + parallel.schedule;
    if (parallel.zero_stage > 0)
      layout += detail::concat(", ZeRO-", parallel.zero_stage,
                               parallel.data_size(world.size()) > 1 ? "" : " (no effect: data 1)");
  }
  const std::int64_t local_params = count_elements(trainer->parameters());
  if (world.size() > 1) log_built_parameters(world, *groups, local_params);
  std::string val;
  if (trainer->val_data() != nullptr) {
    val = "; data.val " + describe_dataset(*trainer->val_data());
    const std::int64_t reads = config.training.eval_batches * config.training.global_batch_size;
    if (config.training.eval_interval == 0 && !s.options.eval_only)
      val += " (not evaluated: training.eval_interval is 0)";
    else if (reads > trainer->val_windows())  // a small file: its windows weigh unevenly
      val +=
          detail::concat(" (an evaluation reads ", reads, " sequences of its ",
                         count_of(trainer->val_windows(), "window", "windows"), ": they repeat)");
  }
  const std::string micro_batches = detail::concat(
      count_of(config.micro_batches_per_step(world.size()), "micro-batch", "micro-batches"), " of ",
      parallel.micro_batch_size);
  if (s.options.eval_only) {
    log_info("ternion:", val.substr(1), "; tokenizer ", trainer->tokenizer().describe());
    log_info("ternion: --eval-only: ", count_of(config.training.eval_batches, "batch", "batches"),
             " of ", config.training.global_batch_size, " sequences (", micro_batches, ")", layout,
             ", ", count_of(num_threads(), "thread", "threads"),
             world.size() > 1 ? " per rank" : "");
    return evaluate_only(*trainer);
  }
  // The tokens this run's steps read, for the passes over data.train the line names.
  const std::int64_t steps_left =
      std::max<std::int64_t>(config.training.steps - trainer->resumed_step(), 0);
  const double read = static_cast<double>(steps_left) *
                      static_cast<double>(config.training.global_batch_size) *
                      static_cast<double>(config.model.seq_len);
  // Bytes name tokens 0-255 only: data of a BPE's ids trains, but its samples print as <id>.
  std::string tokenizer_note;
  const DataBlend& train_data = *trainer->train_data();
  const std::uint32_t largest = train_data.max_token();
  if (trainer->tokenizer().is_bytes() && largest > 255) {
    const std::filesystem::path beside =
        std::filesystem::path(train_data.paths().front()).parent_path() / "tokenizer.json";
    std::error_code none;
    tokenizer_note = detail::concat(
        ", but data.train holds tokens up to ", largest, ", which bytes do not name (samples "
        "print them as <id>): set data.tokenizer to the tokenizer.json the data was made with",
        std::filesystem::exists(beside, none) ? ", as '" + beside.string() + "'" : "");
  }
  log_info("ternion: data.train ", describe_train_data(train_data, read), val, "; tokenizer ",
           trainer->tokenizer().describe(), tokenizer_note);
  log_info("ternion: ", config.training.steps, " steps of ", config.training.global_batch_size,
           " sequences (", micro_batches, ")", layout, ", ",
           count_of(num_threads(), "thread", "threads"), world.size() > 1 ? " per rank" : "",
           ", optimizer ", config.optimizer.type, " (",
           describe_schedule(config.optimizer, config.training.steps), "), parameters ",
           human_bytes(local_params * 4.0), world.size() > 1 ? " per rank" : "",
           ", optimizer state ", human_bytes(static_cast<double>(trainer->optimizer_state_bytes())),
           config.training.device == "cuda"
               ? detail::concat(", on CUDA in ", config.training.precision, " (backend ",
                                comm_backend_name(parallel.comm_backend(true)), ", attention ",
                                config.training.attention,
                                config.training.deterministic ? "" : ", non-deterministic", ")")
               : std::string(config.training.precision == "bf16" ? ", bf16 compute" : ""));
  if (s.options.dry_run) {
    log_info("ternion: memory estimate at the step's peak: ", describe(*estimate));
    log_info("ternion: dry run: config and data are valid");
    return 0;
  }
  trainer->run();
  if (trainer->stopped_early()) {
    if (!config.checkpoint.save_dir.empty()) return 0;  // saved: a resume goes on from there
    // Nothing saved and the run unfinished: a scheduler must not count it as done.
    log_info("ternion: the run did not finish and nothing was saved (checkpoint.save_dir is "
             "not set): exit status 1");
    return 1;
  }
  if (config.training.sample_tokens > 0) trainer->log_sample("");
  return 0;
}

// "blocks 0-1, embeddings, ln_f": what one pipeline stage holds (n_layer >= pp: never none).
std::string stage_contents(const ModelConfig& m, const RankLayout& layout, int rank,
                           std::int64_t virtual_stages) {
  const RankPlacement& p = layout.at(rank);
  std::string text;
  for (std::int64_t v = 0; v < virtual_stages; ++v) {
    const StageBlocks blocks = pipeline_stage_blocks(m.n_layer, layout.pp_size * virtual_stages,
                                                     v * layout.pp_size + p.coords.pp_rank);
    if (!text.empty()) text += " + ";
    text += blocks.size() == 1 ? "block " + std::to_string(blocks.begin)
                               : "blocks " + std::to_string(blocks.begin) + "-" +
                                     std::to_string(blocks.end - 1);
  }
  if (p.is_first_stage) text += ", embeddings";
  if (!p.is_last_stage) return text;
  const ModelFamily& family = model_family(m.family);
  text += ", " + family.final_norm_name();
  if (!family.ties_embeddings(m)) return text + ", LM head";
  return p.is_first_stage ? text : text + ", LM head (tied wte copy)";
}

// Several ranks, --dry-run: the data on every rank, the layout and its process groups; rank 0
// prints the layout and what each rank holds.
int run_dry_run_on_ranks(Communicator& world, const Setup& s) {
  const TrainConfig& config = *s.config;
  const ParallelConfig& parallel = config.parallel;
  std::int64_t total_params = 0;
  std::vector<std::int64_t> rank_params;
  std::vector<MemoryEstimate> estimates;  // rank 0's
  std::optional<RankLayout> layout;
  const std::optional<Failure> local = capture([&] {
    const Tokenizer tokenizer = open_tokenizer(config);
    const DataBlend train = open_blend("data.train", config.data.train, config.model, tokenizer);
    std::vector<std::string> inputs = train.paths();
    if (!config.data.val.empty()) {
      const TokenDataset val = open_dataset("data.val", config.data.val, config.model, tokenizer);
      refuse_shared_shards(train, val);
      for (const std::string& path : val.paths()) inputs.push_back(path);
    }
    check_outputs_writable(config, world.rank(), inputs);
    layout = make_rank_layout(world.size(), parallel.tensor, parallel.pipeline, parallel.data);
    total_params = parameters_on_rank(config.model, make_rank_layout(1, 1, 1, 1), 0);
    for (int r = 0; r < world.size(); ++r)
      rank_params.push_back(parameters_on_rank(config.model, *layout, r, parallel.virtual_stages));
    if (world.rank() == 0)
      for (int r = 0; r < world.size(); ++r)
        estimates.push_back(estimate_memory(config, *layout, r));
  });
  if (const std::optional<int> status = agree_on_failure(world, local)) return *status;

  const ProcessGroups groups(world, *layout);  // collective
  if (const std::optional<int> status =
          agree_on_failure(world, capture([&] { check_tensor_groups_within_nodes(groups); })))
    return *status;
  if (world.rank() == 0) {
    const ModelConfig& m = config.model;
    log_info("ternion: layout tensor ", layout->tp_size, " x pipeline ", layout->pp_size,
             " x data ", layout->dp_size, " on ", layout->world_size, " ranks (rank = pp * ",
             layout->dp_size * layout->tp_size, " + dp * ", layout->tp_size, " + tp)");
    for (int r = 0; r < layout->world_size; ++r) log_info(layout_line(*layout, r));
    log_info(model_line(m, total_params));
    log_info("ternion: parameters per rank (the ranks of a data-parallel group hold copies):");
    for (int r = 0; r < layout->world_size; ++r) {
      const RankCoords& c = layout->at(r).coords;
      log_info("  rank ", r, " tp=", c.tp_rank, " pp=", c.pp_rank, ": ",
               human_count(static_cast<double>(rank_params[static_cast<std::size_t>(r)])), " (",
               rank_params[static_cast<std::size_t>(r)], ") ",
               stage_contents(m, *layout, r, parallel.virtual_stages));
    }
    log_info("ternion: memory estimate per rank at the step's peak:");
    for (int r = 0; r < layout->world_size; ++r)
      log_info("  rank ", r, ": ", describe(estimates[static_cast<std::size_t>(r)]));
    log_info("ternion: ", config.training.steps, " steps of ", config.training.global_batch_size,
             " sequences (",
             count_of(config.micro_batches_per_step(world.size()), "micro-batch", "micro-batches"),
             " of ", parallel.micro_batch_size, " on each of ", layout->dp_size,
             " data-parallel ranks), ", count_of(num_threads(), "thread", "threads"), " per rank");
    log_info("ternion: dry run: config, data and layout are valid on ", world.size(), " ranks");
  }
  return 0;
}

int run(Communicator& world, int argc, char** argv) {
  Setup setup;
  const std::optional<Failure> read = capture(
      [&] {
        read_setup(setup, argc, argv, world.size());
        check_comm_fault_injection();
      });
  if (const std::optional<int> status = agree_on_failure(world, read)) return *status;
  if (world.size() > 1)
    if (const std::optional<int> status = agree_on_command(world, setup.options)) return *status;
  if (setup.finished) {
    if (world.rank() != 0) return 0;
    std::cout << setup.output;
    flush_standard_output();
    return 0;
  }
  const TrainConfig& config = *setup.config;
  if (world.size() > 1)
    if (const std::optional<int> status = agree_on_config(world, config)) return *status;
  if (config.training.threads > 0) set_num_threads(static_cast<int>(config.training.threads));
  if (config.training.device == "cpu" && world.rank() == 0)
    if (const std::string warning = blas_kernel_warning(); !warning.empty())
      log_info("ternion: warning: ", warning);
  CommWatchdogSettings watchdog;
  watchdog.timeout = std::chrono::seconds(config.parallel.comm_timeout_s);
  watchdog.flight_dir = config.logging.flight_directory();
  watchdog.world_rank = world.rank();
  watchdog.world_size = world.size();
  configure_comm_watchdog(watchdog);
  if (world.size() == 1) {
    if (setup.options.dry_run) {
      // The one-rank layout, built as on many ranks so the dry run checks the same code.
      const ProcessGroups groups(world, make_rank_layout(1, config.parallel.tensor,
                                                         config.parallel.pipeline,
                                                         config.parallel.data));
    }
    return run_training(world, setup);
  }
  if (setup.options.dry_run) return run_dry_run_on_ranks(world, setup);
  return run_training(world, setup);
}

}  // namespace

int train_main(int argc, char** argv) {
  g_program_start = std::chrono::steady_clock::now();
  if (argc > 0 && argv[0] != nullptr && argv[0][0] != '\0')
    g_program = std::filesystem::path(argv[0]).filename().string();
  std::optional<MpiRuntime> mpi;         // declared first: finalised after the communicator
  std::unique_ptr<Communicator> world;
  if (const std::optional<Failure> failed = capture([&] {
        if (!MpiRuntime::initialized()) mpi.emplace(&argc, &argv);
        world = mpi_world_communicator();
      })) {
    std::fputs(failed->text.c_str(), stderr);
    return failed->status;
  }
  set_log_rank(world->rank(), world->size());
  try {
    return run(*world, argc, argv);
  } catch (...) {
    // Only work the ranks did not agree on gets here; with other ranks possibly waiting in a
    // collective, the job ends.
    const Failure failure = failure_of(std::current_exception());
    write_flight_record_now("error: " +
                            failure.text.substr(0, failure.text.find_last_not_of('\n') + 1));
    if (world->size() > 1)
      abort_job(failure.text.substr(0, failure.text.find_last_not_of('\n') + 1), failure.status);
    std::fputs(failure.text.c_str(), stderr);
    return failure.status;
  }
}

}  // namespace ternion
