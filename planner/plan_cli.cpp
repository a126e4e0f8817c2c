#include "planner/plan_cli.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/atomic_file.h"
#include "framework/output_path.h"
#include "framework/error.h"
#include "framework/logging.h"
#include "planner/layout_search.h"
#include "training/cli_option_values.h"

namespace ternion {

namespace {

constexpr const char* kUsage =
    "usage: ternion-plan --config FILE --cluster FILE [--set section.key=value ...] [--top N]\n"
    "                    [--layout T,P,D[,MB[,V]]] [--json] [--write-config FILE]\n";

nlohmann::ordered_json to_json(const PlannedLayout& planned) {
  const StepPrediction& p = planned.prediction;
  const TrainConfig& c = planned.config;
  nlohmann::ordered_json j;
  j["tensor"] = planned.layout.tensor;
  j["pipeline"] = planned.layout.pipeline;
  j["data"] = planned.layout.data;
  j["micro_batch_size"] = planned.layout.micro_batch_size;
  j["virtual_stages"] = planned.layout.virtual_stages;
  j["schedule"] = pipeline_schedule_name(c.parallel.pipeline_schedule());
  j["zero_stage"] = c.parallel.zero_stage;
  j["recompute"] = c.training.recompute;
  j["sequence_parallel"] = c.parallel.sequence_parallel;
  j["precision"] = c.training.precision;
  j["step_time_s"] = p.step_time_s;
  j["tokens_per_s"] = p.tokens_per_s;
  j["tflops_per_gpu"] = p.tflops_per_gpu;
  j["mfu"] = p.mfu;
  j["memory_gb_per_gpu"] = p.memory_gb_per_gpu;
  j["fits"] = planned.fits;
  j["bubble_fraction"] = p.bubble_fraction;
  j["compute_s"] = p.compute_s;
  j["tensor_comm_s"] = p.tensor_comm_s;
  j["pipeline_send_s"] = p.pipeline_send_s;
  j["data_reduction"] = p.data_reduction;
  j["data_comm_s"] = p.data_comm_s;
  j["data_comm_exposed_s"] = p.data_comm_exposed_s;
  j["optimizer_s"] = p.optimizer_s;
  return j;
}

std::string seconds_str(double s) {
  char text[32];
  if (s >= 1) std::snprintf(text, sizeof text, "%.3f s", s);
  else std::snprintf(text, sizeof text, "%.2f ms", s * 1e3);
  return text;
}

void print_table(const PlanResult& result, const ClusterSpec& cluster, int top) {
  std::printf("%3s %6s %8s %5s %4s %2s %10s %11s %11s %6s %9s %7s %11s %11s\n", "#", "tensor",
              "pipeline", "data", "mb", "v", "step (s)", "tokens/s", "TFLOP/s/GPU", "MFU",
              "memory GB", "bubble", "tensor (s)", "data (s)");
  int shown = 0;
  for (const PlannedLayout& planned : result.ranked) {
    if (shown++ == top) break;
    const StepPrediction& p = planned.prediction;
    const LayoutChoice& l = planned.layout;
    std::printf(
        "%3d %6lld %8lld %5lld %4lld %2lld %10.4f %11.0f %11.2f %5.1f%% %9.2f %6.1f%% %11.4f "
        "%11.4f\n",
        shown, static_cast<long long>(l.tensor), static_cast<long long>(l.pipeline),
        static_cast<long long>(l.data), static_cast<long long>(l.micro_batch_size),
        static_cast<long long>(l.virtual_stages), p.step_time_s, p.tokens_per_s, p.tflops_per_gpu,
        100 * p.mfu, p.memory_gb_per_gpu, 100 * p.bubble_fraction, p.tensor_comm_s,
        p.data_comm_exposed_s);
  }
  std::printf("(tensor: tensor-parallel communication; data: the exposed part of the data-parallel "
              "reduction; memory of %.3g GB a GPU)\n", cluster.gpu.memory_gb);
}

void explain(const PlannedLayout& planned, const ClusterSpec& cluster) {
  const StepPrediction& p = planned.prediction;
  const TrainConfig& c = planned.config;
  std::printf("layout: %s; schedule %s, ZeRO stage %lld, recompute %s, precision %s%s\n",
              planned.layout.str().c_str(), pipeline_schedule_name(c.parallel.pipeline_schedule()),
              static_cast<long long>(c.parallel.zero_stage), c.training.recompute.c_str(),
              c.training.precision.c_str(),
              c.parallel.sequence_parallel ? ", sequence parallel" : "");
  for (std::size_t s = 0; s < p.stage_costs.size(); ++s)
    std::printf("  stage %zu, one micro-batch: forward %s, backward %s (tensor-parallel "
                "communication included)\n",
                s, seconds_str(p.stage_costs[s].forward).c_str(),
                seconds_str(p.stage_costs[s].backward).c_str());
  std::printf("  compute of the slowest stage, whole step:    %s\n",
              seconds_str(p.compute_s).c_str());
  std::printf("  tensor-parallel collectives (all exposed):   %s\n",
              seconds_str(p.tensor_comm_s).c_str());
  std::printf("  pipeline: one send %s; schedule %s with a bubble of %.1f%%\n",
              seconds_str(p.pipeline_send_s).c_str(), seconds_str(p.pipeline_s).c_str(),
              100 * p.bubble_fraction);
  if (!p.data_reduction.empty())
    std::printf("  data-parallel reduction (%s): %s, exposed %s\n", p.data_reduction.c_str(),
                seconds_str(p.data_comm_s).c_str(), seconds_str(p.data_comm_exposed_s).c_str());
  std::printf("  optimizer, clipping and the rest:            %s\n",
              seconds_str(p.optimizer_s).c_str());
  std::printf("step %s: %.0f tokens/s, %.2f TFLOP/s a GPU, MFU %.1f%%\n",
              seconds_str(p.step_time_s).c_str(), p.tokens_per_s, p.tflops_per_gpu, 100 * p.mfu);
  std::printf("memory a GPU: %s (%s %.3g GB)\n", describe(p.memory).c_str(),
              planned.fits ? "fits in" : "DOES NOT FIT in", cluster.gpu.memory_gb);
}

// The largest term of an estimate that does not fit, for the message.
std::string largest_term(const MemoryEstimate& m) {
  std::vector<std::pair<std::size_t, const char*>> terms = {
      {m.parameters, "parameters"}, {m.gradients, "gradients"},
      {m.optimizer_state, "optimizer state"}, {m.other_resident, "buffers"},
      {m.step, "the step's activations and temporaries"}};
  const auto largest = *std::max_element(terms.begin(), terms.end());
  return std::string(largest.second) + " (" + human_bytes(static_cast<double>(largest.first)) + ")";
}

// Through data/atomic_file.h: its temporary name is the process's own, so concurrent runs
// writing one path do not collide, and it is removed when the write or the rename fails.
void write_config(const std::string& path, const TrainConfig& config) {
  const std::string text = "# Written by ternion-plan.\n" + config_yaml(config);
  write_file_atomically(path, "config",
                        [&](int fd) { return write_all(fd, text.data(), text.size()); });
}

int run(int argc, char** argv) {
  std::string config_path, cluster_path, layout_text, write_path, top_text;
  std::vector<std::string> overrides;
  // An empty value is refused, not taken as the option left out.
  bool json = false, layout_given = false, write_given = false, top_given = false;
  CliOptionValues values({"--config", "--cluster", "--layout", "--write-config", "--top", "--set"});
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() { return values.take(argc, argv, i); };
    if (arg == "--config") config_path = value();
    else if (arg == "--cluster") cluster_path = value();
    else if (arg == "--layout") {
      layout_text = value();
      layout_given = true;
    } else if (arg == "--write-config") {
      write_path = value();
      write_given = true;
    } else if (arg == "--top") {
      top_text = value();
      top_given = true;
    }
    else if (arg == "--json") json = true;
    else if (arg == "--set") {
      TN_CHECK_AS(UsageError, i + 1 < argc, "--set needs section.key=value");
      overrides.push_back(argv[++i]);
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      TN_THROW(UsageError, "unknown argument '", arg, "'");
    }
  }
  TN_CHECK_AS(UsageError, !config_path.empty(), "--config FILE is required");
  TN_CHECK_AS(UsageError, !cluster_path.empty(), "--cluster FILE is required");
  TN_CHECK_AS(UsageError, !write_given || !write_path.empty(), "--write-config needs a file name");
  if (write_given) {
    const std::string why_not = why_not_replaceable(write_path, {config_path, cluster_path});
    TN_CHECK_AS(DataError, why_not.empty(), "--write-config: ", why_not);
  }
  int top = 10;
  if (top_given) {
    std::int64_t parsed = 0;
    TN_CHECK_AS(UsageError,
                detail::parse_decimal(top_text, parsed) && parsed >= 1 && parsed <= 1000000,
                "--top needs a positive whole number, got '", top_text, "'");
    top = static_cast<int>(parsed);
  }
  const ClusterSpec cluster = ClusterSpec::load_file(cluster_path);
  // Each candidate replaces the config's layout (and is validated as it would run), so the
  // config is read as one rank's: a config written for 64 ranks plans as well.
  for (const char* key : {"parallel.tensor=1", "parallel.pipeline=1", "parallel.data=1",
                          "parallel.virtual_stages=1"})
    overrides.push_back(key);
  // So is its micro-batch size, which the search chooses and --layout T,P,D,MB names: only a
  // --layout without one runs (and checks) the config's.
  if (!layout_given || std::count(layout_text.begin(), layout_text.end(), ',') >= 3)
    overrides.push_back("parallel.micro_batch_size=1");
  const TrainConfig config = TrainConfig::load(config_path, overrides, 1);

  if (layout_given) {
    const PlannedLayout planned =
        plan_layout(config, cluster, parse_layout_choice(layout_text, config));
    if (json) std::cout << nlohmann::ordered_json::array({to_json(planned)}).dump(2) << '\n';
    else explain(planned, cluster);
    if (!write_path.empty()) write_config(write_path, planned.config);
    return 0;
  }

  const PlanResult result = plan_layouts(config, cluster);
  if (result.ranked.empty()) {
    if (!result.smallest_misfit.empty()) {
      const PlannedLayout& least = result.smallest_misfit.front();
      TN_THROW(ConfigError, "no layout of ", config.source, " fits ", cluster.source, " (",
               cluster.gpu.memory_gb, " GB a GPU): the least memory a GPU any layout needs is ",
               human_bytes(static_cast<double>(least.prediction.memory.peak())), " (",
               least.layout.str(), "), most of it ", largest_term(least.prediction.memory));
    }
    if (result.candidates == 0)
      TN_THROW(ConfigError, "no split of ", cluster.world_size(), " GPUs runs ", config.source,
               ": the tensor size must be a power of two that divides a node's GPUs (",
               cluster.gpus_per_node, "), the pipeline at most model.n_layer (",
               config.model.n_layer,
               ") stages, and the data ranks must divide training.global_batch_size (",
               config.training.global_batch_size, ")");
    TN_THROW(ConfigError, "no split of ", cluster.world_size(), " GPUs runs ", config.source,
             ": each was refused; the first, ", result.first_refusal);
  }
  if (json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const PlannedLayout& planned : result.ranked) all.push_back(to_json(planned));
    std::cout << all.dump(2) << '\n';
  } else {
    std::printf("%s on %s: %lld GPU%s (%lld node%s x %lld%s%s); %d layout%s considered, %d "
                "refused by the config, %d too large, %zu fit\n",
                config.source.c_str(), cluster.source.c_str(),
                static_cast<long long>(cluster.world_size()), cluster.world_size() == 1 ? "" : "s",
                static_cast<long long>(cluster.nodes),
                cluster.nodes == 1 ? "" : "s", static_cast<long long>(cluster.gpus_per_node),
                cluster.gpu.name.empty() ? "" : " ", cluster.gpu.name.c_str(), result.candidates,
                result.candidates == 1 ? "" : "s", result.invalid, result.too_large,
                result.ranked.size());
    print_table(result, cluster, top);
  }
  if (!write_path.empty()) write_config(write_path, result.ranked.front().config);
  return 0;
}

}  // namespace

int plan_main(int argc, char** argv) {
  try {
    const int status = run(argc, argv);
    flush_standard_output();
    return status;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ternion-plan: error: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "ternion-plan: %serror: %s\n", e.is_user_error() ? "" : "internal ",
                 e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion-plan: internal error: %s\n", e.what());
    return 1;
  }
}

}  // namespace ternion
