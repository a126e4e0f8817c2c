// The planner's search and its predictions on a small model: candidates, validation, ranking,
// and the terms each layout's prediction is made of.
#include "planner/layout_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "small_model.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;
using testing_support::small_model;

ClusterSpec one_node_of(int gpus) {
  ClusterSpec c;
  c.source = "test";
  c.nodes = 1;
  c.gpus_per_node = gpus;
  c.gpu = {"test", 10, 10, 1, 100, 0.5};
  c.intra_node = {10, 5};
  return c;
}

TEST(LayoutSearch, CandidatesSplitTheGpusAndTheBatch) {
  ScratchDir dir("plan-candidates");
  const TrainConfig c = small_model(dir);
  const std::vector<LayoutChoice> all = candidate_layouts(c, one_node_of(4));
  for (const LayoutChoice& l : all) {
    EXPECT_EQ(l.tensor * l.pipeline * l.data, 4) << l.str();
    EXPECT_EQ(c.training.global_batch_size % (l.data * l.micro_batch_size), 0) << l.str();
    EXPECT_TRUE(l.virtual_stages == 1 || l.pipeline > 1) << l.str();
  }
  // tensor 1, 2, 4 x pipeline (1, 2, 4 of 4 blocks) with the micro-batch sizes and interleaving.
  auto has = [&](LayoutChoice want) {
    for (const LayoutChoice& l : all)
      if (l.str() == want.str()) return true;
    return false;
  };
  EXPECT_TRUE(has({1, 1, 4, 1, 1}));
  EXPECT_TRUE(has({2, 2, 1, 8, 1}));
  EXPECT_TRUE(has({1, 2, 2, 1, 2}));
  EXPECT_FALSE(has({1, 1, 4, 1, 2}));  // interleaving needs stages
  EXPECT_TRUE(has({1, 4, 1, 1, 1}));
}

ClusterSpec nodes_of(int nodes, int gpus) {
  ClusterSpec c = one_node_of(gpus);
  c.nodes = nodes;
  c.inter_node = {1, 5};
  return c;
}

// ternion-train refuses a tensor group that spans nodes, so the search never offers one and a
// layout asked for is refused: on nodes of 6 GPUs a tensor group of 4 would (ranks 4-7).
TEST(LayoutSearch, TensorGroupsStayWithinANode) {
  ScratchDir dir("plan-tensor-nodes");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  c.training.global_batch_size = 12;
  for (const auto& [nodes, gpus] : {std::pair{2, 6}, std::pair{2, 3}, std::pair{4, 1}}) {
    const ClusterSpec cluster = nodes_of(nodes, gpus);
    std::set<std::int64_t> tensors;
    for (const LayoutChoice& l : candidate_layouts(c, cluster)) {
      EXPECT_EQ(gpus % l.tensor, 0) << gpus << " GPUs a node, " << l.str();
      tensors.insert(l.tensor);
    }
    EXPECT_EQ(tensors, (gpus == 6 ? std::set<std::int64_t>{1, 2} : std::set<std::int64_t>{1}));
  }
  try {
    plan_layout(c, nodes_of(2, 6), {4, 1, 3, 1, 1});
    ADD_FAILURE() << "a tensor group across nodes was planned";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.tensor = 4 on nodes of 6 GPUs (test): tensor "
                                         "group [4,5,6,7] spans nodes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(plan_layout(c, nodes_of(2, 6), {2, 1, 6, 1, 1}));
}

TEST(LayoutSearch, PredictsEachTermOfALayout) {
  ScratchDir dir("plan-terms");
  testing_support::prepare_builtin(dir);
  const TrainConfig c = small_model(dir);
  const PlannedLayout data4 = plan_layout(c, one_node_of(4), {1, 1, 4, 2, 1});
  const StepPrediction& p = data4.prediction;
  EXPECT_GT(p.compute_s, 0);
  EXPECT_EQ(p.tensor_comm_s, 0);
  EXPECT_EQ(p.pipeline_send_s, 0);
  EXPECT_EQ(p.bubble_fraction, 0);
  EXPECT_EQ(p.data_reduction, "flat");
  EXPECT_GT(p.data_comm_s, 0);
  EXPECT_LE(p.data_comm_exposed_s, p.data_comm_s);
  EXPECT_GT(p.optimizer_s, 0);
  EXPECT_NEAR(p.step_time_s, p.pipeline_s + p.data_comm_exposed_s + p.optimizer_s, 1e-12);
  EXPECT_NEAR(p.pipeline_s, p.compute_s, 1e-12);  // one stage: its compute, nothing idle
  EXPECT_GT(p.mfu, 0);
  EXPECT_LT(p.mfu, 0.5);  // gemm_efficiency
  EXPECT_TRUE(data4.fits);
  ClusterSpec costly = one_node_of(4);  // the hidden part of the reduction still costs it all
  costly.gpu.overlap_cost = 1;
  const StepPrediction all = plan_layout(c, costly, {1, 1, 4, 2, 1}).prediction;
  EXPECT_NEAR(all.data_comm_exposed_s, all.data_comm_s, 1e-15);
  EXPECT_EQ(data4.config.parallel.data, 4);

  const PlannedLayout pipeline2 = plan_layout(c, one_node_of(4), {1, 2, 2, 1, 1});
  EXPECT_GT(pipeline2.prediction.pipeline_send_s, 0);
  EXPECT_GT(pipeline2.prediction.bubble_fraction, 0);
  EXPECT_EQ(pipeline2.prediction.stage_costs.size(), 2u);
  const PlannedLayout tensor2 = plan_layout(c, one_node_of(4), {2, 1, 2, 2, 1});
  EXPECT_GT(tensor2.prediction.tensor_comm_s, 0);
  EXPECT_THROW(plan_layout(c, one_node_of(4), {1, 1, 2, 2, 1}), ConfigError);  // 2 ranks of 4
  EXPECT_THROW(plan_layout(c, one_node_of(4), {1, 4, 1, 1, 4}),
               ConfigError);  // 16 chunks, 4 blocks
}

// Every candidate is ranked, refused or too large; and the ranking follows the costs: over a
// link too slow for anything but activations, the pipeline wins (it sends one micro-batch's
// activations where data parallelism sends every gradient and tensor parallelism every
// block's output); over a link too fast to matter, a layout without a pipeline (no bubble).
TEST(LayoutSearch, RanksTheLayoutsThatFitFastestFirst) {
  ScratchDir dir("plan-rank");
  testing_support::prepare_builtin(dir);
  const TrainConfig c = small_model(dir);
  ClusterSpec slow = one_node_of(2);
  slow.intra_node = {1e-4, 5};
  const PlanResult result = plan_layouts(c, slow);
  ASSERT_FALSE(result.ranked.empty());
  EXPECT_EQ(result.candidates, static_cast<int>(result.ranked.size()) + result.invalid +
                                   result.too_large);
  EXPECT_EQ(result.ranked.front().layout.pipeline, 2) << result.ranked.front().layout.str();
  ClusterSpec fast = one_node_of(2);
  fast.intra_node = {1e6, 0};
  const PlanResult fast_plan = plan_layouts(c, fast);
  EXPECT_EQ(fast_plan.ranked.front().layout.pipeline, 1) << fast_plan.ranked.front().layout.str();
  ClusterSpec tiny_memory = one_node_of(2);
  tiny_memory.gpu.memory_gb = 1e-6;
  const PlanResult none = plan_layouts(c, tiny_memory);
  EXPECT_TRUE(none.ranked.empty());
  ASSERT_EQ(none.smallest_misfit.size(), 1u);
}

// A layout whose state between steps alone is over the GPU's memory is not stepped (the
// search's shortcut on thousands of GPUs); what the search reports stays what stepping every
// layout gives: the same layouts fit, and the least need of the misfits is exact.
TEST(LayoutSearch, SkippingLayoutsThatCannotFitChangesNothingReported) {
  ScratchDir dir("plan-skip");
  testing_support::prepare_builtin(dir);
  const TrainConfig c = small_model(dir);
  ClusterSpec cluster = one_node_of(4);
  std::vector<PlannedLayout> whole;
  for (const LayoutChoice& layout : candidate_layouts(c, cluster)) try {
      whole.push_back(plan_layout(c, cluster, layout));
    } catch (const ConfigError&) {
    }
  ASSERT_GT(whole.size(), 4u);
  double least_peak = 1e30, least_resident = 1e30;
  std::vector<double> peaks;
  for (const PlannedLayout& p : whole) {
    peaks.push_back(p.prediction.memory_gb_per_gpu);
    least_peak = std::min(least_peak, p.prediction.memory_gb_per_gpu);
    least_resident = std::min(least_resident, p.prediction.memory.resident() / 1e9);
  }

  cluster.gpu.memory_gb = least_resident / 2;  // nothing fits; nothing needs a step to say so
  const PlannedLayout skipped = plan_layout(c, cluster, whole.front().layout, true);
  EXPECT_FALSE(skipped.counted);
  EXPECT_FALSE(skipped.fits);
  EXPECT_GT(skipped.prediction.memory_gb_per_gpu, cluster.gpu.memory_gb);
  EXPECT_LT(skipped.prediction.memory_gb_per_gpu, whole.front().prediction.memory_gb_per_gpu);
  const PlanResult none = plan_layouts(c, cluster);
  EXPECT_TRUE(none.ranked.empty());
  ASSERT_EQ(none.smallest_misfit.size(), 1u);
  EXPECT_TRUE(none.smallest_misfit.front().counted);
  EXPECT_DOUBLE_EQ(none.smallest_misfit.front().prediction.memory_gb_per_gpu, least_peak);
  EXPECT_EQ(none.too_large, static_cast<int>(whole.size()));

  std::sort(peaks.begin(), peaks.end());
  cluster.gpu.memory_gb = peaks[peaks.size() / 2];  // about half fit
  std::set<std::string> fitting;
  for (const PlannedLayout& p : whole)
    if (p.prediction.memory_gb_per_gpu <= cluster.gpu.memory_gb) fitting.insert(p.layout.str());
  const PlanResult half = plan_layouts(c, cluster);
  std::set<std::string> ranked;
  for (const PlannedLayout& p : half.ranked) ranked.insert(p.layout.str());
  EXPECT_EQ(ranked, fitting);
  EXPECT_EQ(half.too_large, static_cast<int>(whole.size() - fitting.size()));
}

TEST(LayoutSearch, ParsesLayoutsFromTheCommandLine) {
  ScratchDir dir("plan-parse");
  const TrainConfig c = small_model(dir);
  const LayoutChoice l = parse_layout_choice("2,1,4", c);
  EXPECT_EQ(l.str(), "tensor 2 x pipeline 1 x data 4, micro-batch 2, 1 virtual stage");
  EXPECT_EQ(parse_layout_choice("1,2,2,1,2", c).str(),
            "tensor 1 x pipeline 2 x data 2, micro-batch 1, 2 virtual stages");
  EXPECT_THROW(parse_layout_choice("2,1", c), UsageError);
  EXPECT_THROW(parse_layout_choice("2,x,4", c), UsageError);
  EXPECT_THROW(parse_layout_choice("2,0,4", c), UsageError);
  EXPECT_THROW(parse_layout_choice("1,1,1,1,1,1", c), UsageError);
  EXPECT_THROW(parse_layout_choice("1,1,2,", c), UsageError);  // not "1,1,2"
  EXPECT_THROW(parse_layout_choice("", c), UsageError);
}

// A layout the config refuses is placed at --layout, the option that names it.
TEST(LayoutSearch, ARefusedLayoutIsNamedAsTheLayout) {
  ScratchDir dir("plan-refused");
  const TrainConfig c = small_model(dir);
  try {
    apply_layout(c, {1, 4, 1, 1, 4}, 4);  // 16 chunks, 4 blocks
    ADD_FAILURE() << "16 chunks of 4 blocks applied";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("--layout 1,4,1,1,4: parallel.virtual_stages: ", 0), 0u) << message;
    EXPECT_EQ(message.find("--set"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace ternion
