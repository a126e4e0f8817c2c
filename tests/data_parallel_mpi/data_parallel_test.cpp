// Data parallelism and full 3D layouts against one rank, under mpirun: each layout whose
// tensor x pipeline x data size is the world size runs 20 training steps (dropout on, clipping
// active) and must log the one-rank losses at every step to 1e-5 relative and end with the
// same parameters. Every rank also trains the unsharded reference itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <unistd.h>

#include "mpi_gtest.h"
#include "parallel_run_support.h"
#include "trainer_state.h"
#include "parallel/process_groups.h"
#include "sharded_compare.h"
#include "training/trainer.h"

namespace ternion {
namespace {

struct Layout {
  std::int64_t data = 1, tensor = 1, pipeline = 1, virtual_stages = 1, zero_stage = 0;
  bool sequence_parallel = false;
  bool overlap = true;
};

TrainConfig run_config(const Layout& layout) {
  TrainConfig c = test::small_parallel_run(test::corpus_dir("dp-test"));
  c.parallel.data = layout.data;
  c.parallel.tensor = layout.tensor;
  c.parallel.pipeline = layout.pipeline;
  c.parallel.virtual_stages = layout.virtual_stages;
  c.parallel.sequence_parallel = layout.sequence_parallel;
  c.parallel.zero_stage = layout.zero_stage;
  c.parallel.overlap_grad_reduce = layout.overlap;
  c.parallel.bucket_size_mb = 0.02;  // several buckets even for this small model
  return c;
}

TrainConfig one_rank(TrainConfig c) {
  const std::int64_t micro = c.parallel.micro_batch_size;
  c.parallel = ParallelConfig{};
  c.parallel.micro_batch_size = micro;
  return c;
}

struct ParallelRun {
  std::unique_ptr<ProcessGroups> groups;
  std::unique_ptr<Trainer> trainer;
};

ParallelRun make_run(const TrainConfig& c) {
  Communicator& world = testing_mpi::world();
  ParallelRun run;
  run.groups = std::make_unique<ProcessGroups>(
      world,
      make_rank_layout(world.size(), c.parallel.tensor, c.parallel.pipeline, c.parallel.data));
  run.trainer = std::make_unique<Trainer>(c, run.groups.get());
  return run;
}

void check_layout(const Layout& layout) {
  const TrainConfig c = run_config(layout);
  Trainer reference(one_rank(c));
  ParallelRun run = make_run(c);
  for (std::int64_t step = 1; step <= c.training.steps; ++step) {
    const StepMetrics want = reference.train_step(step);
    const StepMetrics got = run.trainer->train_step(step);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << "step " << step;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-4 * want.grad_norm) << "step " << step;
  }
  EXPECT_NEAR(run.trainer->evaluate(), reference.evaluate(), 1e-5 * reference.evaluate());
  // Values after 20 updates.
  std::map<std::string, const Parameter*> by_name;
  for (const Parameter* p : reference.model().parameters()) by_name[p->name] = p;
  for (const Parameter* p : run.trainer->parameters())
    EXPECT_TRUE(test::close_to(p->name, p->value.to_vector(),
                               test::slice_for(by_name.at(p->name)->value, *p).to_vector(), 1e-3));
  // The last step's reduced gradients, per parameter: what this rank's optimizer updated from
  // (the whole gradient; under ZeRO-1 this rank's share of it, under ZeRO-2 its shard).
  std::size_t compared = 0;
  for (const ParameterSegment& segment : run.trainer->optimizer_segments()) {
    const Parameter& p = *segment.param;
    const std::vector<float> want = test::slice_for(by_name.at(p.name)->grad, p).to_vector();
    std::vector<float> got = segment.reduced_grad.defined() ? segment.reduced_grad.to_vector()
                                                            : p.grad.to_vector();
    if (!segment.reduced_grad.defined())
      got = std::vector<float>(got.begin() + segment.begin, got.begin() + segment.end);
    EXPECT_TRUE(test::close_to(p.name + " reduced grad [" + std::to_string(segment.begin) + ", " +
                                   std::to_string(segment.end) + ")",
                               got, std::vector<float>(want.begin() + segment.begin,
                                                       want.begin() + segment.end), 1e-3));
    compared += static_cast<std::size_t>(segment.end - segment.begin);
  }
  EXPECT_GT(compared, 0u);
  testing_mpi::world().barrier();
}

bool fits(const Layout& l) {
  return l.data * l.tensor * l.pipeline == testing_mpi::world().size();
}

#define TN_LAYOUT_TEST(Name, ...)                                                         \
  TEST(DataParallel, Name) {                                                              \
    Layout layout;                                                                        \
    __VA_ARGS__;                                                                          \
    if (!fits(layout)) GTEST_SKIP() << "needs data x tensor x pipeline ranks";            \
    check_layout(layout);                                                                 \
  }

TN_LAYOUT_TEST(Data2, layout.data = 2)
TN_LAYOUT_TEST(Data2WithoutOverlap, layout.data = 2; layout.overlap = false)
TN_LAYOUT_TEST(Data2Zero1, layout.data = 2; layout.zero_stage = 1)
TN_LAYOUT_TEST(Data4, layout.data = 4)
TN_LAYOUT_TEST(Data4Zero1, layout.data = 4; layout.zero_stage = 1)
TN_LAYOUT_TEST(Data2Tensor2Zero1, layout.data = 2; layout.tensor = 2; layout.zero_stage = 1)
TN_LAYOUT_TEST(Data2Pipeline2Zero1, layout.data = 2; layout.pipeline = 2; layout.zero_stage = 1)
TN_LAYOUT_TEST(ThreeD2x2x2Zero1, layout.data = 2; layout.tensor = 2; layout.pipeline = 2;
               layout.zero_stage = 1)
TN_LAYOUT_TEST(ThreeD2x2x2InterleavedSequenceParallelZero1, layout.data = 2; layout.tensor = 2;
               layout.pipeline = 2; layout.virtual_stages = 2; layout.sequence_parallel = true;
               layout.zero_stage = 1)

TN_LAYOUT_TEST(Data2Zero2, layout.data = 2; layout.zero_stage = 2)
TN_LAYOUT_TEST(Data4Zero2, layout.data = 4; layout.zero_stage = 2)
TN_LAYOUT_TEST(Data2Tensor2Zero2, layout.data = 2; layout.tensor = 2; layout.zero_stage = 2)
TN_LAYOUT_TEST(Data2Pipeline2Zero2, layout.data = 2; layout.pipeline = 2; layout.zero_stage = 2)
TN_LAYOUT_TEST(ThreeD2x2x2InterleavedSequenceParallelZero2, layout.data = 2; layout.tensor = 2;
               layout.pipeline = 2; layout.virtual_stages = 2; layout.sequence_parallel = true;
               layout.zero_stage = 2)

// ZeRO-2 holds the gradients of 1 / data of the parameters for the step, and the whole
// gradient only of the buckets a backward is filling or reducing (this tiny model's buckets
// are large beside it: docs/benchmarks.md has GPT-2 124M's figures).
TEST(DataParallel, Zero2ShardsTheGradients) {
  const int world = testing_mpi::world().size();
  if (world < 2) GTEST_SKIP() << "needs two data ranks";
  Layout layout;
  layout.data = world;
  ParallelRun plain = make_run(run_config(layout));  // the whole gradients, all reduced
  plain.trainer->train_step(1);
  layout.zero_stage = 1;
  ParallelRun zero1 = make_run(run_config(layout));
  zero1.trainer->train_step(1);
  layout.zero_stage = 2;
  ParallelRun zero2 = make_run(run_config(layout));
  zero2.trainer->train_step(1);
  const GradientReducer& two = *zero2.trainer->reducer();
  const double whole = static_cast<double>(plain.trainer->reducer()->stats().peak_gradient_bytes);
  const double lasting = static_cast<double>(two.lasting_gradient_bytes());
  const double peak = static_cast<double>(two.stats().peak_gradient_bytes);
  EXPECT_NEAR(lasting / whole, 1.0 / world, 0.01) << lasting << " of " << whole << " bytes";
  EXPECT_GT(peak, lasting);  // buckets were filled
  // and released as they were reduced: at most the tied embedding's bucket (filled from the
  // head's backward to the embedding's), a block's (up to three), and two in flight.
  std::int64_t largest = 0;
  for (const GradientBucket& b : two.buckets()) largest = std::max(largest, b.numel);
  EXPECT_LE(peak, lasting + 6.0 * 4.0 * static_cast<double>(largest))
      << peak << " bytes, buckets of up to " << 4 * largest;
  EXPECT_EQ(zero2.trainer->optimizer_state_bytes(), zero1.trainer->optimizer_state_bytes());
}

// The reducer starts bucket reductions during backward (before the optimizer step waits for
// them), and ZeRO-1 keeps optimizer state for 1 / data of the parameters.
TEST(DataParallel, ReductionsStartDuringBackwardAndZero1ShardsTheOptimizerState) {
  const int world = testing_mpi::world().size();
  if (world < 2) GTEST_SKIP() << "needs two data ranks";
  Layout layout;
  layout.data = world;
  ParallelRun overlapped = make_run(run_config(layout));
  const StepMetrics m = overlapped.trainer->train_step(1);
  const ReducerStats& stats = overlapped.trainer->reducer()->stats();
  EXPECT_GE(stats.buckets, 3);
  EXPECT_EQ(m.buckets_reduced_early, stats.buckets_started_early);
  EXPECT_GE(stats.buckets_started_early, stats.buckets - 1);  // all but the last-finished one
  layout.overlap = false;
  ParallelRun serial = make_run(run_config(layout));
  serial.trainer->train_step(1);
  EXPECT_EQ(serial.trainer->reducer()->stats().buckets_started_early, 0);

  layout.overlap = true;
  layout.zero_stage = 1;
  ParallelRun zero = make_run(run_config(layout));
  const double full = static_cast<double>(overlapped.trainer->optimizer_state_bytes());
  const double sharded = static_cast<double>(zero.trainer->optimizer_state_bytes());
  EXPECT_NEAR(sharded / full, 1.0 / world, 0.02) << sharded << " of " << full << " bytes";
}

// A NaN in one rank's gradients skips the step on every rank, and nothing is applied on any:
// every parameter and every optimizer state tensor keeps its bits, the NaN's rank's included.
TEST(DataParallel, NonFiniteGradientsOnOneRankSkipTheStepEverywhere) {
  const int world = testing_mpi::world().size();
  if (world < 2) GTEST_SKIP() << "needs two data ranks";
  for (std::int64_t zero_stage : {0, 1, 2}) {
    Layout layout;
    layout.data = world;
    layout.zero_stage = zero_stage;
    ParallelRun run = make_run(run_config(layout));
    ASSERT_FALSE(run.trainer->train_step(1).skipped);  // the optimizer state is no longer zero
    Parameter* ln = nullptr;
    for (Parameter* p : run.trainer->parameters())
      if (p->name == "ln_f.weight") ln = p;
    ASSERT_NE(ln, nullptr);
    if (testing_mpi::world().rank() == world - 1)
      ln->value.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    const auto before = test::trainer_state_bits(*run.trainer);
    const StepMetrics m = run.trainer->train_step(2);
    EXPECT_TRUE(m.skipped) << "zero_stage " << zero_stage;
    EXPECT_EQ(test::changed_state(before, test::trainer_state_bits(*run.trainer)),
              std::vector<std::string>{})
        << "zero_stage " << zero_stage << ", rank " << testing_mpi::world().rank();
    EXPECT_GT(before.size(), run.trainer->parameters().size()) << "no optimizer state compared";
  }
}

}  // namespace
}  // namespace ternion
