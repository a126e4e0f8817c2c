// The memory estimate against the run it estimates: the meta step allocates what the real
// step allocates, so on one rank in f32 the two peaks are equal to the byte. Several ranks'
// layouts are checked against their runs under mpirun by tests/cli/memory_estimate_runs.sh.
#include "training/memory_estimate.h"

#include <gtest/gtest.h>

#include "framework/device_runtime.h"
#include "framework/error.h"
#include "layers/layer_registry.h"
#include "training/trainer.h"
#include "training_test_support.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;

TrainConfig small_run(const ScratchDir& dir) {
  TrainConfig c;
  c.model.seq_len = 64;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.d_model = 64;
  c.parallel.micro_batch_size = 4;
  c.training.steps = 2;
  c.training.global_batch_size = 8;
  c.data.train = dir.file("train.bin");
  return c;
}

// The peak of a real one-rank run's step 2 (step 1's is the same), measured as the run does.
std::size_t measured_peak(const TrainConfig& config) {
  Trainer trainer(config);
  trainer.train_step(1);
  trainer.train_step(2);
  return device_memory_stats(Device::cpu()).peak;
}

struct Comparison {
  MemoryEstimate estimate;
  std::size_t measured = 0;
};

Comparison compare(const TrainConfig& config) {
  Comparison c;
  const std::size_t base = device_memory_stats(Device::cpu()).in_use;  // the test's own tensors
  c.estimate = estimate_memory(config, make_rank_layout(1, 1, 1, 1), 0);
  c.measured = measured_peak(config) - base;
  return c;
}

// A user's block whose own loop reads a tensor's data, without skipping shape-only ones.
class ReadsItsInput : public Layer {
 public:
  explicit ReadsItsInput(std::string name) : Layer(std::move(name)) {}
  Tensor forward(const Tensor& input, ActivationContext&) override {
    (void)input.data<float>();
    return input;
  }
  Tensor backward(const Tensor& grad_output, ActivationContext&) override { return grad_output; }
};

// Every run steps its blocks on shape-only tensors to estimate its memory: a user's block
// that fails there is named with the rule, not reported as an internal error.
TEST(MemoryEstimate, AUserBlockThatReadsShapeOnlyDataIsNamed) {
  ScratchDir dir("memory-estimate-user-block");
  testing_support::prepare_builtin(dir);
  LayerRegistry::instance().add("reads_its_input", [](const BlockSpec& spec) {
    return std::make_unique<ReadsItsInput>(spec.name);
  });
  TrainConfig c = small_run(dir);
  c.model.block = "reads_its_input";
  try {
    estimate_memory(c, make_rank_layout(1, 1, 1, 1), 0);
    ADD_FAILURE() << "the block's failure was not reported";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("block type 'reads_its_input' failed in the memory estimate", 0), 0u)
        << what;
    EXPECT_NE(what.find("x.device().is_meta()"), std::string::npos) << what;
  }
}

TEST(MemoryEstimate, IsTheMeasuredPeakOnOneRank) {
  ScratchDir dir("memory-estimate");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_run(dir);
  c.model.dropout = 0.1;
  for (const char* family : {"gpt2", "llama"}) {
    c.model.family = family;
    for (const char* recompute : {"none", "selective", "full"}) {
      c.training.recompute = recompute;
      const Comparison got = compare(c);
      EXPECT_EQ(got.estimate.peak(), got.measured)
          << family << ", recompute " << recompute << ": " << describe(got.estimate);
    }
  }
}

// What each part of the breakdown holds: f32 values, f32 gradients, AdamW's two moments.
TEST(MemoryEstimate, BreaksThePeakDown) {
  ScratchDir dir("memory-breakdown");
  testing_support::prepare_builtin(dir);
  const TrainConfig c = small_run(dir);
  const MemoryEstimate e = estimate_memory(c, make_rank_layout(1, 1, 1, 1), 0);
  const Trainer trainer(c);
  std::size_t values = 0;
  for (const Parameter* p : trainer.parameters()) values += p->value.nbytes();
  EXPECT_GE(e.parameters, values);
  EXPECT_LT(e.parameters, values + 512 * trainer.parameters().size());  // block rounding
  EXPECT_EQ(e.gradients, values);
  EXPECT_EQ(e.optimizer_state, 2 * values);
  EXPECT_GT(e.step, 0u);
  EXPECT_EQ(e.contexts_in_flight, 1);
  EXPECT_EQ(e.peak(), e.parameters + e.gradients + e.optimizer_state + e.other_resident + e.step);
}

// Each rank of a layout is estimated on this one process: ZeRO-1 halves the optimizer state
// over two data ranks, ZeRO-2 the lasting gradients too; 1F1B's first of four stages holds the most
// micro-batches in flight.
TEST(MemoryEstimate, EstimatesEachRankOfALayout) {
  ScratchDir dir("memory-layouts");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_run(dir);
  c.model.n_layer = 4;
  c.parallel.micro_batch_size = 1;
  const MemoryEstimate one = estimate_memory(c, make_rank_layout(1, 1, 1, 1), 0);

  c.parallel.data = 2;
  c.parallel.zero_stage = 1;
  const MemoryEstimate zero1 = estimate_memory(c, make_rank_layout(2, 1, 1, 2), 1);
  EXPECT_NEAR(static_cast<double>(zero1.optimizer_state), one.optimizer_state / 2.0,
              0.01 * static_cast<double>(one.optimizer_state));
  // ZeRO-1 keeps the whole gradients and a chunk buffer for their reduce-scatter: 1 + 1/D.
  EXPECT_NEAR(static_cast<double>(zero1.gradients), 1.5 * static_cast<double>(one.gradients),
              0.01 * static_cast<double>(one.gradients));
  c.parallel.zero_stage = 2;
  const MemoryEstimate zero2 = estimate_memory(c, make_rank_layout(2, 1, 1, 2), 1);
  EXPECT_NEAR(static_cast<double>(zero2.gradients), one.gradients / 2.0,
              0.01 * static_cast<double>(one.gradients));

  c.parallel.data = 1;
  c.parallel.zero_stage = 0;
  c.parallel.pipeline = 4;
  const RankLayout pp4 = make_rank_layout(4, 1, 4, 1);
  const MemoryEstimate first = estimate_memory(c, pp4, 0), last = estimate_memory(c, pp4, 3);
  EXPECT_EQ(first.contexts_in_flight, 4);  // 8 micro-batches: 1F1B keeps pp - stage in flight
  EXPECT_EQ(last.contexts_in_flight, 1);
  EXPECT_LT(first.parameters, one.parameters);
}

// A pipeline stage holds what its schedule keeps in flight, not what the step has sent: with
// 1F1B's in-flight count fixed, more micro-batches raise a stage's peak by no more than their
// token ids and losses, far less than the activation each sends (each send gives its buffer
// back once it has finished, on the meta device at once; held to the step's end, they grew
// the peak by an activation a micro-batch).
TEST(MemoryEstimate, APipelineStagesPeakDoesNotGrowWithTheMicroBatches) {
  ScratchDir dir("memory-micro-batches");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_run(dir);
  c.model.n_layer = 4;
  c.parallel.micro_batch_size = 1;
  c.parallel.pipeline = 2;
  const RankLayout pp2 = make_rank_layout(2, 1, 2, 1);
  for (int stage : {0, 1}) {
    c.training.global_batch_size = 4;
    const MemoryEstimate few = estimate_memory(c, pp2, stage);
    c.training.global_batch_size = 16;
    const MemoryEstimate many = estimate_memory(c, pp2, stage);
    EXPECT_EQ(few.contexts_in_flight, many.contexts_in_flight) << "stage " << stage;
    const double activation = 4.0 * c.model.seq_len * c.model.d_model;  // [1, T, C] f32
    const double growth = static_cast<double>(many.step) - static_cast<double>(few.step);
    EXPECT_LT(growth / 12, activation / 8) << "stage " << stage << ": " << growth
                                           << " bytes more for 12 more micro-batches";
  }
}

// The CPU's bf16 kernels widen their inputs into f32 temporaries the meta step does not make
// (a CUDA step makes none): on the CPU the bf16 estimate is below the measured peak.
TEST(MemoryEstimate, MissesOnlyTheCpuKernelsWideningInBf16) {
  ScratchDir dir("memory-bf16");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_run(dir);
  c.training.precision = "bf16";
  const Comparison got = compare(c);
  EXPECT_LT(got.estimate.peak(), got.measured);
  EXPECT_GT(got.estimate.peak(), got.measured / 2);
}

}  // namespace
}  // namespace ternion
