// One-rank training on the GPU against the CPU, in-process (the Trainer, as ternion-train runs
// it): fp32 reproduces the CPU run's losses and gradient norms to float rounding over 12 steps
// (two micro-batches a step, dropout on, so the masks, the gradient accumulation and AdamW all
// take part); bf16 follows the fp32 CPU run to bf16's rounding and learns.
#include <cmath>
#include <string>

#include "gpu_test_util.h"
#include "training/trainer.h"
#include "training/training_test_support.h"

namespace ternion::test {
namespace {

using testing_support::ScratchDir;

TrainConfig small_run(const ScratchDir& dir, const std::string& device,
                      const std::string& precision) {
  TrainConfig c;
  c.model.seq_len = 32;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.d_model = 64;
  c.model.dropout = 0.1;
  c.parallel.micro_batch_size = 4;
  c.training.steps = 12;
  c.training.global_batch_size = 8;
  c.training.device = device;
  c.training.precision = precision;
  c.training.eval_interval = 0;
  c.optimizer.lr = 3e-3;
  c.optimizer.warmup_steps = 3;
  c.data.train = dir.file("train.bin");
  return c;
}

TEST(GpuTraining, Fp32StepsReproduceTheCpuRun) {
  TN_REQUIRE_GPU();
  ScratchDir dir("gpu-fp32");
  testing_support::prepare_builtin(dir, 50000);
  Trainer cpu(small_run(dir, "cpu", "fp32"));
  Trainer gpu(small_run(dir, "cuda", "fp32"));
  for (std::int64_t step = 1; step <= 12; ++step) {
    const StepMetrics want = cpu.train_step(step);
    const StepMetrics got = gpu.train_step(step);
    EXPECT_NEAR(got.loss, want.loss, 1e-4 * std::abs(want.loss)) << "step " << step;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-3 * want.grad_norm) << "step " << step;
  }
}

TEST(GpuTraining, Bf16StepsFollowTheFp32CpuRun) {
  TN_REQUIRE_GPU();
  ScratchDir dir("gpu-bf16");
  testing_support::prepare_builtin(dir, 50000);
  Trainer cpu(small_run(dir, "cpu", "fp32"));
  Trainer gpu(small_run(dir, "cuda", "bf16"));
  double first = 0.0, last = 0.0;
  for (std::int64_t step = 1; step <= 12; ++step) {
    const StepMetrics want = cpu.train_step(step);
    const StepMetrics got = gpu.train_step(step);
    ASSERT_TRUE(std::isfinite(got.loss)) << "step " << step;
    EXPECT_NEAR(got.loss, want.loss, 0.02 * want.loss + 0.02) << "step " << step;
    if (step == 1) first = got.loss;
    last = got.loss;
  }
  EXPECT_LT(last, first - 0.5) << "bf16 on the GPU: first " << first << ", last " << last;
}

}  // namespace
}  // namespace ternion::test
