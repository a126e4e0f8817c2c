// bf16 mixed precision on CPU ranks: the kernels stage bf16 tensors through f32 there, so the
// whole mixed-precision path (bf16 compute copies and activations, f32 master weights,
// gradients and optimizer state) runs here and is checked against the f32 run.
#include <gtest/gtest.h>

#include <cmath>

#include "framework/bfloat16.h"
#include "layers/mixed_precision.h"
#include "training/trainer.h"
#include "training_test_support.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;

TrainConfig tiny_run(const ScratchDir& dir, const std::string& precision) {
  TrainConfig c;
  c.model.seq_len = 32;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.d_model = 64;
  c.parallel.micro_batch_size = 8;
  c.training.steps = 30;
  c.training.global_batch_size = 16;
  c.training.precision = precision;
  // Low enough that the f32 run has no loss spike: at 3e-3 both runs spiked at step 22
  // (gradient norm 70 from 0.4), where the heights of two spikes differ by chance, not by
  // bf16's rounding.
  c.optimizer.lr = 2e-3;
  c.optimizer.warmup_steps = 5;
  c.data.train = dir.file("train.bin");
  return c;
}

TEST(MixedPrecision, ComputeCopiesAreTheMasterValuesRoundedToBf16) {
  Parameter p = make_parameter("w", {3}, ParameterInit::Zeros, 0.0f, false);
  std::vector<Parameter*> params{&p};
  set_compute_precision(params, Precision::BF16);
  ASSERT_TRUE(p.compute.defined());
  EXPECT_EQ(p.compute.dtype(), DType::BF16);
  EXPECT_TRUE(p.compute_value().shares_storage_with(p.compute));

  p.value.copy_from(Tensor::from_vector({1.00390625f, -2.0f, 3.14159f}, {3}));
  refresh_compute_copies(params);
  const std::vector<float> rounded = p.compute.to_vector();
  EXPECT_EQ(rounded[0], 1.0f);  // the tie rounds to even
  EXPECT_EQ(rounded[1], -2.0f);
  EXPECT_EQ(rounded[2], bf16_to_float(float_to_bf16(3.14159f)));
  EXPECT_EQ(p.value.dtype(), DType::F32);  // the master copy keeps every bit
  EXPECT_EQ(p.value.to_vector()[0], 1.00390625f);

  set_compute_precision(params, Precision::F32);
  EXPECT_FALSE(p.compute.defined());
  EXPECT_TRUE(p.compute_value().shares_storage_with(p.value));
}

TEST(MixedPrecision, ParsesPrecisionNames) {
  EXPECT_EQ(parse_precision("fp32", "training.precision"), Precision::F32);
  EXPECT_EQ(parse_precision("bf16", "training.precision"), Precision::BF16);
  EXPECT_THROW(parse_precision("fp8", "training.precision"), ConfigError);
}

// bf16 training follows the f32 run's loss curve to within bf16's rounding, and learns.
TEST(MixedPrecision, Bf16TrainingTracksTheF32Run) {
  ScratchDir dir("bf16");
  testing_support::prepare_builtin(dir, 50000);
  Trainer f32(tiny_run(dir, "fp32"));
  Trainer bf16(tiny_run(dir, "bf16"));
  double first = 0.0, last = 0.0;
  for (std::int64_t step = 1; step <= 30; ++step) {
    const StepMetrics a = f32.train_step(step);
    const StepMetrics b = bf16.train_step(step);
    ASSERT_TRUE(std::isfinite(b.loss)) << "step " << step;
    EXPECT_NEAR(b.loss, a.loss, 0.005 * a.loss + 0.005) << "step " << step;
    if (step == 1) first = b.loss;
    last = b.loss;
  }
  EXPECT_LT(last, first - 1.0) << "bf16 run: first " << first << ", last " << last;
  // Master weights and gradients stay f32; the compute copies are bf16.
  for (const Parameter* p : bf16.parameters()) {
    EXPECT_EQ(p->value.dtype(), DType::F32) << p->name;
    EXPECT_EQ(p->grad.dtype(), DType::F32) << p->name;
    EXPECT_EQ(p->compute.dtype(), DType::BF16) << p->name;
  }
}

}  // namespace
}  // namespace ternion
