// Pipeline parallelism against one rank, under mpirun: every layout whose tensor x pipeline
// size is the world size runs 20 training steps and must log the one-rank losses at every
// step (to 1e-5 relative) and end with the same parameters. Every rank also trains the
// unsharded reference itself, so the comparisons are local.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "mpi_gtest.h"
#include "parallel_run_support.h"
#include "parallel/process_groups.h"
#include "sharded_compare.h"
#include "training/trainer.h"

namespace ternion {
namespace {

struct Layout {
  std::int64_t tensor = 1, pipeline = 1, virtual_stages = 1;
  std::string schedule = "1f1b";
  bool sequence_parallel = false;
};

TrainConfig run_config(const Layout& layout) {
  TrainConfig c = test::small_parallel_run(test::corpus_dir("pp-test"));
  c.parallel.tensor = layout.tensor;
  c.parallel.pipeline = layout.pipeline;
  c.parallel.virtual_stages = layout.virtual_stages;
  c.parallel.schedule = layout.schedule;
  c.parallel.sequence_parallel = layout.sequence_parallel;
  return c;
}

// Returns the peak number of micro-batches whose activations this rank held in a step.
int check_layout(const Layout& layout) {
  Communicator& world = testing_mpi::world();
  const TrainConfig c = run_config(layout);
  TrainConfig one = c;
  one.parallel = ParallelConfig{};
  one.parallel.micro_batch_size = c.parallel.micro_batch_size;
  const ProcessGroups groups(world,
                             make_rank_layout(world.size(), layout.tensor, layout.pipeline, 1));
  Trainer reference(one), trainer(c, &groups);
  int peak = 0;
  for (std::int64_t step = 1; step <= c.training.steps; ++step) {
    const StepMetrics want = reference.train_step(step);
    const StepMetrics got = trainer.train_step(step);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << "step " << step;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-4 * want.grad_norm) << "step " << step;
    peak = std::max(peak, trainer.last_pipeline_step().peak_live_contexts);
  }
  EXPECT_NEAR(trainer.evaluate(), reference.evaluate(), 1e-5 * reference.evaluate());
  test::expect_parameters_match(trainer.parameters(), reference.model().parameters(), 1e-3,
                                /*all=*/false);
  // The stages together hold every parameter of the model: how many ranks hold each one.
  const std::vector<Parameter*> whole = reference.model().parameters();
  std::vector<float> held(whole.size(), 0.0f);
  for (std::size_t i = 0; i < whole.size(); ++i)
    for (const Parameter* p : trainer.parameters())
      if (p->name == whole[i]->name) held[i] = 1.0f;
  Tensor holders = Tensor::from_vector(held, {static_cast<std::int64_t>(held.size())});
  world.all_reduce(holders, ReduceOp::Sum);
  const std::vector<float> counts = holders.to_vector();
  for (std::size_t i = 0; i < whole.size(); ++i)
    EXPECT_GE(counts[i], static_cast<float>(layout.tensor)) << whole[i]->name << " is on no stage";
  // Generation runs through the stages too and samples the same text.
  SampleOptions sample;
  sample.prompt = "The ";
  sample.max_tokens = 12;
  sample.seed = 5;
  EXPECT_EQ(trainer.generate(sample), reference.generate(sample));
  world.barrier();
  return peak;
}

bool fits(const Layout& layout) {
  return layout.tensor * layout.pipeline == testing_mpi::world().size();
}

#define TN_LAYOUT_TEST(Name, ...)                                                      \
  TEST(PipelineParallel, Name) {                                                       \
    const Layout layout{__VA_ARGS__};                                                  \
    if (!fits(layout)) GTEST_SKIP() << "needs tensor x pipeline ranks";                \
    check_layout(layout);                                                              \
  }

TN_LAYOUT_TEST(TwoStages1F1B, 1, 2)
TN_LAYOUT_TEST(TwoStagesGPipe, 1, 2, 1, "gpipe")
TN_LAYOUT_TEST(TwoStagesInterleaved, 1, 2, 2)
TN_LAYOUT_TEST(FourStages1F1B, 1, 4)
TN_LAYOUT_TEST(TwoStagesTimesTensorTwo, 2, 2)
TN_LAYOUT_TEST(TwoStagesTimesTensorTwoSequenceParallel, 2, 2, 1, "1f1b", true)
TN_LAYOUT_TEST(TwoStagesTimesTensorTwoZeroBubble, 2, 2, 1, "zb-h1", true)

// Zero bubble (each backward split, its weight gradients deferred) on every stage of a 2- or
// 4-stage pipeline; it holds up to p micro-batches on every stage, where 1F1B holds p - stage.
TEST(PipelineParallel, ZeroBubbleHoldsOneFOneBsFirstStageBoundOnEveryStage) {
  const int p = testing_mpi::world().size();
  if (p < 2) GTEST_SKIP() << "needs two stages";
  EXPECT_EQ(check_layout(Layout{1, p, 1, "zb-h1"}), p);
}

// 1F1B holds at most `stages - stage` micro-batches of activations on a stage; GPipe holds
// all of them.
TEST(PipelineParallel, OneFOneBBoundsActivationsAndGPipeDoesNot) {
  const int p = testing_mpi::world().size();
  if (p < 2) GTEST_SKIP() << "needs two stages";
  const int stage = testing_mpi::world().rank();
  const int one_f_one_b = check_layout(Layout{1, p});
  const int gpipe = check_layout(Layout{1, p, 1, "gpipe"});
  EXPECT_EQ(one_f_one_b, p - stage);
  EXPECT_EQ(gpipe, 8);  // every micro-batch of the step
}

}  // namespace
}  // namespace ternion
