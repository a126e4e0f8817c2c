// What a step does, counted on the meta device (framework/op_cost.h), against the facts it
// must agree with: the model's FLOPs per token (layers/model_facts.h), the gradient bytes a
// data-parallel reduction carries, the activations a pipeline sends.
#include <gtest/gtest.h>

#include "layers/model_facts.h"
#include "planner/step_model.h"
#include "small_model.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;
using testing_support::small_model;

RankStepOps one_rank_step(const TrainConfig& c) {
  return count_rank_step(c, make_rank_layout(1, 1, 1, 1), 0);
}

double tokens_per_step(const TrainConfig& c) {
  return static_cast<double>(c.training.global_batch_size * c.model.seq_len);
}

TEST(StepCounts, ForwardGemmsAreTheModelsFlopsAndTheBackwardTwice) {
  ScratchDir dir("step-counts-flops");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  for (const char* family : {"gpt2", "llama"}) {
    c.model.family = family;
    const RankStepOps step = one_rank_step(c);
    const double model = tokens_per_step(c) * forward_flops_per_token(c.model);
    EXPECT_NEAR(step.ops.counts(OpPhase::forward).gemm_flops() / model, 1.0, 1e-12) << family;
    EXPECT_NEAR(step.ops.counts(OpPhase::backward).gemm_flops() / model, 2.0, 1e-12) << family;
    EXPECT_EQ(step.ops.counts(OpPhase::other).gemm_flops(), 0.0) << family;
    EXPECT_GT(step.ops.counts(OpPhase::forward).memory_bytes, 0.0) << family;
    EXPECT_GT(step.ops.counts(OpPhase::other).memory_bytes, 0.0) << family;  // the optimizer
  }
}

TEST(StepCounts, FullRecomputationRepeatsTheBlocksForwardInTheBackward) {
  ScratchDir dir("step-counts-recompute");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  const RankStepOps none = one_rank_step(c);
  c.training.recompute = "full";
  const RankStepOps full = one_rank_step(c);
  const double forward = none.ops.counts(OpPhase::forward).gemm_flops();
  const double extra = full.ops.counts(OpPhase::backward).gemm_flops() -
                       none.ops.counts(OpPhase::backward).gemm_flops();
  // The blocks' forward again: all of the forward but the LM head.
  EXPECT_GT(extra, 0.5 * forward);
  EXPECT_LT(extra, forward);
  EXPECT_EQ(full.ops.counts(OpPhase::forward).gemm_flops(), forward);
}

// The cuBLAS attention path (training.attention: cublas) computes whole [T, T] products, the
// backward recomputing the scores, and sends the squares through memory
// (kernels/cuda/attention.cu); the fused kernels compute half of each square and keep it in
// registers. The counts differ by exactly that.
TEST(StepCounts, TheCublasAttentionPathCountsWholeSquaresThroughMemory) {
  ScratchDir dir("step-counts-cublas");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  const RankStepOps fused = one_rank_step(c);
  c.training.attention = "cublas";
  const RankStepOps cublas = one_rank_step(c);
  const double t = static_cast<double>(c.model.seq_len);
  const double hs = static_cast<double>(c.model.d_model / c.model.n_head);
  const double heads = static_cast<double>(c.training.global_batch_size * c.model.n_head *
                                           c.model.n_layer);  // (sequence, head) per layer
  const double square_product = 2 * t * t * hs;  // FLOPs of one whole [T, T] x hs product
  const auto difference = [&](OpPhase phase, bool flops) {
    const OpCounts& a = cublas.ops.counts(phase);
    const OpCounts& b = fused.ops.counts(phase);
    return flops ? a.gemm_flops() - b.gemm_flops() : a.memory_bytes - b.memory_bytes;
  };
  // Forward: 2 whole products against 2 halves; backward: 5 whole against 4 halves.
  EXPECT_NEAR(difference(OpPhase::forward, true), heads * square_product, 1e-6);
  EXPECT_NEAR(difference(OpPhase::backward, true), heads * 3 * square_product, 1e-6);
  // f32: forward 4 square passes (scores, probabilities: each written and read), 8 more of
  // [T, hs]; backward 10 and 18.
  EXPECT_NEAR(difference(OpPhase::forward, false), heads * 4 * (4 * t * t + 8 * t * hs), 1e-6);
  EXPECT_NEAR(difference(OpPhase::backward, false), heads * 4 * (10 * t * t + 18 * t * hs), 1e-6);
  EXPECT_EQ(cublas.ops.counts(OpPhase::other).memory_bytes,
            fused.ops.counts(OpPhase::other).memory_bytes);
}

TEST(StepCounts, TensorParallelRanksEachCountHalfTheGemms) {
  ScratchDir dir("step-counts-tp");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  c.parallel.tensor = 2;
  const RankLayout layout = make_rank_layout(2, 2, 1, 1);
  const RankStepOps rank0 = count_rank_step(c, layout, 0);
  const double model = tokens_per_step(c) * forward_flops_per_token(c.model);
  EXPECT_NEAR(rank0.ops.counts(OpPhase::forward).gemm_flops() / model, 0.5, 1e-12);
  // Megatron's two all-reduces a block in the forward, each of the micro-batch's activations.
  double forward_all_reduce_bytes = 0;
  for (const auto& [key, totals] : rank0.ops.counts(OpPhase::forward).collectives)
    if (key.second == CollectiveKind::all_reduce && key.first.rfind("tp", 0) == 0)
      forward_all_reduce_bytes += totals.bytes;
  const double block_outputs = 2.0 * c.model.n_layer * tokens_per_step(c) * c.model.d_model * 4;
  EXPECT_GE(forward_all_reduce_bytes, block_outputs);
  EXPECT_LT(forward_all_reduce_bytes, 1.5 * block_outputs);  // plus the embedding's, the loss's
  EXPECT_EQ(rank0.ops.group_members().at("tp[0,1]"), (std::vector<int>{0, 1}));
}

TEST(StepCounts, DataParallelRanksReduceEveryGradientOnce) {
  ScratchDir dir("step-counts-dp");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  c.parallel.data = 2;
  const RankStepOps rank1 = count_rank_step(c, make_rank_layout(2, 1, 1, 2), 1);
  double reduced = 0;  // in the backward: the buckets, as their gradients become ready
  for (const auto& [key, totals] : rank1.ops.counts(OpPhase::backward).collectives)
    if (key.first == "dp[0,1]" && key.second == CollectiveKind::all_reduce) reduced += totals.bytes;
  const double parameters =
      static_cast<double>(parameters_on_rank(c.model, make_rank_layout(2, 1, 1, 2), 1));
  EXPECT_EQ(reduced, 4.0 * parameters);  // f32 gradients
}

// Under zb-h1 each stage's W (its parameter gradients, apart) is counted apart as well: one
// GEMM for each of the forward's own (attention's fused products have none), none elsewhere.
TEST(StepCounts, ZeroBubbleCountsTheWeightGradientsApart) {
  ScratchDir dir("step-counts-zb");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  c.parallel.pipeline = 2;
  const RankLayout layout = make_rank_layout(2, 1, 2, 1);
  auto unfused_flops = [](const OpCounts& counts) {
    double flops = 0;
    for (const auto& [shape, count] : counts.gemms)
      if (!shape.fused) flops += count * shape.flops();
    return flops;
  };
  for (int rank : {0, 1}) {
    c.parallel.schedule = "1f1b";
    EXPECT_TRUE(count_rank_step(c, layout, rank).ops.weight_gradients().gemms.empty());
    c.parallel.schedule = "zb-h1";
    const RankStepOps step = count_rank_step(c, layout, rank);
    const double forward = unfused_flops(step.ops.counts(OpPhase::forward));
    EXPECT_GT(forward, 0.0);
    EXPECT_NEAR(unfused_flops(step.ops.weight_gradients()) / forward, 1.0, 1e-12) << rank;
  }
}

TEST(StepCounts, PipelineStagesSendEachMicroBatchsActivations) {
  ScratchDir dir("step-counts-pp");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_model(dir);
  c.parallel.pipeline = 2;
  const RankLayout layout = make_rank_layout(2, 1, 2, 1);
  const RankStepOps first = count_rank_step(c, layout, 0);
  double calls = 0, bytes = 0, largest = 0;
  for (OpPhase phase : {OpPhase::forward, OpPhase::backward, OpPhase::other})
    for (const auto& [key, totals] : first.ops.counts(phase).collectives)
      if (key.first.rfind("pp", 0) == 0 && key.second == CollectiveKind::send) {
        calls += totals.calls;
        bytes += totals.bytes;
        largest = std::max(largest, totals.largest);
      }
  // The first stage sends each micro-batch's activations, and a few scalars of the step's.
  const double micro_batches = 4;
  const double activation = c.parallel.micro_batch_size * c.model.seq_len * c.model.d_model * 4.0;
  EXPECT_EQ(largest, activation);
  EXPECT_GE(calls, micro_batches);
  EXPECT_GE(bytes, micro_batches * activation);
  EXPECT_LT(bytes, micro_batches * activation + 64 * (calls - micro_batches + 1));
}

}  // namespace
}  // namespace ternion
