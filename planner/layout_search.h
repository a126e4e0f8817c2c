// The layouts the planner considers for a config on a cluster, and each one's prediction:
// every tensor x pipeline x data split of the cluster's GPUs with each tensor group inside a
// node (a power of two that divides gpus_per_node, as ternion-train refuses a tensor group
// across nodes), pipeline stages up to the number of blocks, data ranks that divide the global
// batch, micro-batch sizes that divide each data rank's share, and interleaving (virtual stages
// 2 and 4) where the micro-batch count allows it. The schedule, ZeRO stage, recomputation,
// precision and sequence parallelism are the config's. Each candidate is validated as the run
// would validate it (a ConfigError drops it) and predicted from its ranks' counted steps
// (planner/step_model.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/step_model.h"
#include "training/train_config.h"

namespace ternion {

struct LayoutChoice {
  std::int64_t tensor = 1, pipeline = 1, data = 1, micro_batch_size = 1, virtual_stages = 1;
  std::string str() const;  // "tensor 2 x pipeline 4 x data 8, micro-batch 2, 1 virtual stage"
};

struct PlannedLayout {
  LayoutChoice layout;
  TrainConfig config;  // the input config with the layout applied, as it would run
  StepPrediction prediction;
  bool fits = false;   // memory_gb_per_gpu within the GPU's memory
  // false: a rank's resident memory alone was over the GPU's (plan_layout's skip_misfit), so
  // the step was not counted; memory_gb_per_gpu is then a lower bound, nothing else predicted.
  bool counted = true;
};

// "t,p,d[,mb[,v]]" (UsageError naming the text); the micro-batch size it leaves out comes
// from `config`, the virtual stages are 1.
LayoutChoice parse_layout_choice(const std::string& text, const TrainConfig& config);

// The config with `layout` applied and validated for the cluster's world size (ConfigError).
TrainConfig apply_layout(const TrainConfig& config, const LayoutChoice& layout,
                         std::int64_t world_size);

// Predicts one layout (ConfigError if it cannot run the config, or a tensor group would span
// nodes). With `skip_misfit`, a layout that cannot fit because of what a rank holds between
// steps is not stepped (`counted`).
PlannedLayout plan_layout(const TrainConfig& config, const ClusterSpec& cluster,
                          const LayoutChoice& layout, bool skip_misfit = false);

std::vector<LayoutChoice> candidate_layouts(const TrainConfig& config, const ClusterSpec& cluster);

struct PlanResult {
  std::vector<PlannedLayout> ranked;  // those that fit, fastest first
  int candidates = 0;                  // considered
  int invalid = 0;                     // refused by the config's validation
  std::string first_refusal;           // the first refusal's message
  int too_large = 0;                   // valid, but over the GPU's memory
  // Of those that do not fit: the one needing the least memory (for the message when none fits).
  std::vector<PlannedLayout> smallest_misfit;
};
PlanResult plan_layouts(const TrainConfig& config, const ClusterSpec& cluster);

}  // namespace ternion
