#include "planner/layout_search.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <tuple>
#include <sstream>
#include <unistd.h>

#include "data/token_shard.h"
#include "framework/config_reader.h"
#include "framework/error.h"
#include "layers/model_facts.h"
#include "parallel/process_groups.h"
#include "parallel/rank_layout.h"

namespace ternion {

namespace {

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// The tensor groups of `ranks` that span nodes, by the rule ternion-train refuses them with at
// start-up, over the cluster's placement of ranks (node after node).
std::vector<std::vector<int>> tensor_groups_across_nodes(const RankLayout& ranks,
                                                         const ClusterSpec& cluster) {
  std::vector<int> node_of_rank(static_cast<std::size_t>(ranks.world_size));
  for (int rank = 0; rank < ranks.world_size; ++rank)
    node_of_rank[static_cast<std::size_t>(rank)] = cluster.node_of(rank);
  return tensor_groups_spanning_nodes(ranks, node_of_rank);
}

// The meta step reads the data's headers and samples token ids (training/trainer.h); a plan
// needs neither the user's data nor its size, so it runs on a file of seq_len + 1 zeros.
class StandInTokenFile {
 public:
  explicit StandInTokenFile(std::int64_t seq_len) {
    // A TMPDIR that is not a directory is the user's to fix: said so, not a filesystem_error.
    std::error_code error;
    const std::filesystem::path dir = std::filesystem::temp_directory_path(error);
    if (error) {
      const char* tmpdir = std::getenv("TMPDIR");
      TN_THROW(DataError, "TMPDIR=", tmpdir != nullptr ? tmpdir : "(unset)",
               ": no temporary directory for the planner's stand-in token file (",
               error.message(), "); set TMPDIR to a writable directory");
    }
    path_ = (dir / ("ternion-plan-" + std::to_string(::getpid()) + "-" +
                    std::to_string(seq_len) + ".bin"))
                .string();
    const std::vector<std::int64_t> zeros(static_cast<std::size_t>(seq_len + 1), 0);
    write_token_file(path_, zeros);
  }
  ~StandInTokenFile() { std::remove(path_.c_str()); }
  StandInTokenFile(const StandInTokenFile&) = delete;
  StandInTokenFile& operator=(const StandInTokenFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

std::string LayoutChoice::str() const {
  std::ostringstream out;
  out << "tensor " << tensor << " x pipeline " << pipeline << " x data " << data
      << ", micro-batch " << micro_batch_size << ", " << virtual_stages
      << (virtual_stages == 1 ? " virtual stage" : " virtual stages");
  return out.str();
}

LayoutChoice parse_layout_choice(const std::string& text, const TrainConfig& config) {
  std::vector<std::int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::int64_t value = 0;
    TN_CHECK_AS(UsageError, detail::parse_decimal(item, value) && value >= 1, "--layout: '", text,
                "' is not tensor,pipeline,data[,micro_batch[,virtual_stages]] ",
                "(positive whole numbers): '", item, "'");
    values.push_back(value);
  }
  // getline drops a last empty item: "1,1,2," is refused, not read as "1,1,2".
  TN_CHECK_AS(UsageError, values.size() >= 3 && values.size() <= 5 && text.back() != ',',
              "--layout: '", text, "' is not tensor,pipeline,data[,micro_batch[,virtual_stages]]");
  LayoutChoice layout;
  layout.tensor = values[0];
  layout.pipeline = values[1];
  layout.data = values[2];
  layout.micro_batch_size = values.size() > 3 ? values[3] : config.parallel.micro_batch_size;
  layout.virtual_stages = values.size() > 4 ? values[4] : 1;
  return layout;
}

TrainConfig apply_layout(const TrainConfig& config, const LayoutChoice& layout,
                         std::int64_t world_size) {
  const std::vector<std::string> overrides = {
      "parallel.tensor=" + std::to_string(layout.tensor),
      "parallel.pipeline=" + std::to_string(layout.pipeline),
      "parallel.data=" + std::to_string(layout.data),
      "parallel.micro_batch_size=" + std::to_string(layout.micro_batch_size),
      "parallel.virtual_stages=" + std::to_string(layout.virtual_stages)};
  // A refused layout key is placed at the option that names it, not at a --set nobody typed.
  const std::string origin = "--layout " + std::to_string(layout.tensor) + "," +
                             std::to_string(layout.pipeline) + "," + std::to_string(layout.data) +
                             "," + std::to_string(layout.micro_batch_size) + "," +
                             std::to_string(layout.virtual_stages);
  // The config as resolved: its lines are no lines of the user's file.
  ConfigDocument doc = ConfigDocument::parse_resolved(config_yaml(config),
                                                      config.source + " with " + origin);
  for (const std::string& assignment : overrides) doc.apply_override(assignment, origin);
  return TrainConfig::from_document(std::move(doc), {}, world_size);
}

PlannedLayout plan_layout(const TrainConfig& config, const ClusterSpec& cluster,
                          const LayoutChoice& layout, bool skip_misfit) {
  PlannedLayout planned;
  planned.layout = layout;
  planned.config = apply_layout(config, layout, cluster.world_size());  // validates the fit too

  TrainConfig counted = planned.config;
  const StandInTokenFile data(counted.model.seq_len);
  counted.data.train = data.path();
  counted.data.val.clear();
  const RankLayout ranks = make_rank_layout(cluster.world_size(), layout.tensor, layout.pipeline,
                                            layout.data);
  const std::vector<std::vector<int>> spanning = tensor_groups_across_nodes(ranks, cluster);
  TN_CHECK_AS(ConfigError, spanning.empty(), "parallel.tensor = ", layout.tensor,
              " on nodes of ", cluster.gpus_per_node, " GPUs (", cluster.source,
              "): tensor group ", rank_list_str(spanning.empty() ? std::vector<int>{}
                                                                 : spanning.front()),
              " spans nodes, which ternion-train refuses; the tensor size must divide "
              "cluster.gpus_per_node (", cluster.gpus_per_node, ")");
  // Stages with the same part of the model run the same step: the middle ones holding as
  // many parameters (over all their chunks) are counted once. (Their groups price the same
  // where tensor x data fills whole nodes; elsewhere the first one's placement stands for the
  // others.)
  const std::size_t limit =
      skip_misfit ? static_cast<std::size_t>(cluster.gpu.memory_gb * 1e9) : SIZE_MAX;
  std::vector<RankStepOps> stages;
  std::map<std::tuple<bool, bool, std::int64_t>, std::size_t> counted_role;
  for (int s = 0; s < ranks.pp_size; ++s) {
    RankCoords coords;
    coords.pp_rank = s;
    const int rank = ranks.global_rank(coords);
    const auto role = std::make_tuple(
        s == 0, s == ranks.pp_size - 1,
        parameters_on_rank(counted.model, ranks, rank, layout.virtual_stages));
    if (const auto same = counted_role.find(role); same != counted_role.end()) {
      stages.push_back(stages[same->second]);
      continue;
    }
    counted_role[role] = stages.size();
    stages.push_back(count_rank_step(counted, ranks, rank, limit));
    if (!stages.back().memory.step_counted) {  // over the GPU's memory before its step
      planned.counted = false;
      planned.prediction.memory = stages.back().memory;
      planned.prediction.memory_gb_per_gpu =
          static_cast<double>(planned.prediction.memory.peak()) / 1e9;
      return planned;
    }
  }
  planned.prediction = predict_step(planned.config, ranks, cluster, stages);
  planned.fits = planned.prediction.memory_gb_per_gpu <= cluster.gpu.memory_gb;
  return planned;
}

std::vector<LayoutChoice> candidate_layouts(const TrainConfig& config, const ClusterSpec& cluster) {
  std::vector<LayoutChoice> out;
  const std::int64_t world = cluster.world_size();
  for (std::int64_t tensor = 1; tensor <= cluster.gpus_per_node; tensor *= 2) {
    if (world % tensor != 0) continue;
    // Tensor groups are consecutive ranks whatever the pipeline and data sizes.
    if (!tensor_groups_across_nodes(make_rank_layout(world, tensor, 1, world / tensor), cluster)
             .empty())
      continue;
    for (std::int64_t pipeline : divisors(world / tensor)) {
      if (pipeline > config.model.n_layer) break;
      const std::int64_t data = world / (tensor * pipeline);
      if (config.training.global_batch_size % data != 0) continue;
      const std::int64_t per_rank = config.training.global_batch_size / data;
      for (std::int64_t micro : divisors(per_rank)) {
        const std::int64_t micro_batches = per_rank / micro;
        for (std::int64_t virtual_stages : {1, 2, 4}) {
          if (virtual_stages > 1 && (pipeline == 1 || micro_batches % pipeline != 0)) continue;
          out.push_back({tensor, pipeline, data, micro, virtual_stages});
        }
      }
    }
  }
  return out;
}

PlanResult plan_layouts(const TrainConfig& config, const ClusterSpec& cluster) {
  PlanResult result;
  // Misfits with their candidate's index, so that ties go to the first candidate, as they
  // would if every layout were stepped.
  std::vector<std::pair<int, PlannedLayout>> misfits, skipped;
  const auto plan = [&](int index, const LayoutChoice& layout, bool skip_misfit) {
    try {
      PlannedLayout planned = plan_layout(config, cluster, layout, skip_misfit);
      if (planned.fits) result.ranked.push_back(std::move(planned));
      else (planned.counted ? misfits : skipped).emplace_back(index, std::move(planned));
    } catch (const ConfigError& e) {
      if (result.invalid++ == 0) result.first_refusal = layout.str() + ": " + e.what();
    }
  };
  for (const LayoutChoice& layout : candidate_layouts(config, cluster))
    plan(result.candidates++, layout, /*skip_misfit=*/true);
  // The least need among the misfits is reported exactly: the skipped ones whose lower bound
  // is below the least counted need are stepped after all, least first.
  const auto by_memory = [](const auto& a, const auto& b) {
    return std::pair(a.second.prediction.memory_gb_per_gpu, a.first) <
           std::pair(b.second.prediction.memory_gb_per_gpu, b.first);
  };
  std::stable_sort(skipped.begin(), skipped.end(), by_memory);
  std::size_t stepped = 0;
  for (; stepped < skipped.size(); ++stepped) {
    const auto least = std::min_element(misfits.begin(), misfits.end(), by_memory);
    if (least != misfits.end() && !by_memory(skipped[stepped], *least)) break;
    plan(skipped[stepped].first, skipped[stepped].second.layout, /*skip_misfit=*/false);
  }
  result.too_large = static_cast<int>(misfits.size() + skipped.size() - stepped);
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const PlannedLayout& a, const PlannedLayout& b) {
                     return a.prediction.step_time_s < b.prediction.step_time_s;
                   });
  const auto least = std::min_element(misfits.begin(), misfits.end(), by_memory);
  if (least != misfits.end()) result.smallest_misfit.push_back(least->second);
  return result;
}

}  // namespace ternion
