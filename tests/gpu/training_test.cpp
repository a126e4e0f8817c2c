// One-rank training on the GPU against the CPU, in-process (the Trainer, as ternion-train runs
// it): fp32 reproduces the CPU run's losses and gradient norms to float rounding over 12 steps
// (two micro-batches a step, dropout on, so the masks, the gradient accumulation and AdamW all
// take part); bf16 follows the fp32 CPU run to bf16's rounding and learns; the recomputed
// blocks (selective and full, both families) compute on the GPU what they compute without;
// Llama with grouped-query attention follows the CPU too, and checkpoints resume on the GPU.
#include <cmath>
#include <string>
#include <vector>

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

// Llama with grouped-query attention (2 query heads a key/value head) and Llama 3.1's rotary
// frequency scaling, so the GPU's rotary and GQA paths run what the CPU's run.
TrainConfig llama_gqa(TrainConfig c) {
  c.model.family = "llama";
  c.model.n_head = 4;
  c.model.n_kv_head = 2;
  c.model.rope_scaling_factor = 8.0;
  c.model.rope_scaling_original_context = 16;
  return c;
}

TEST(GpuTraining, Fp32StepsReproduceTheCpuRun) {
  TN_REQUIRE_GPU();
  ScratchDir dir("gpu-fp32");
  testing_support::prepare_builtin(dir, 50000);
  for (const bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama, GQA" : "gpt2");
    TrainConfig cpu_config = small_run(dir, "cpu", "fp32");
    TrainConfig gpu_config = small_run(dir, "cuda", "fp32");
    Trainer cpu(llama ? llama_gqa(cpu_config) : cpu_config);
    Trainer gpu(llama ? llama_gqa(gpu_config) : gpu_config);
    for (std::int64_t step = 1; step <= 12; ++step) {
      const StepMetrics want = cpu.train_step(step);
      const StepMetrics got = gpu.train_step(step);
      EXPECT_NEAR(got.loss, want.loss, 1e-4 * std::abs(want.loss)) << "step " << step;
      EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-3 * want.grad_norm) << "step " << step;
    }
  }
}

// A checkpoint saved on the GPU resumes there bit for bit (its optimizer state loaded into GPU
// tensors through the CPU, bf16's compute copies rounded again from the loaded master
// weights), and one saved on the CPU resumes on the GPU to the fp32 tolerance above.
TEST(GpuTraining, ACheckpointResumesOnTheGpu) {
  TN_REQUIRE_GPU();
  ScratchDir dir("gpu-resume");
  testing_support::prepare_builtin(dir, 50000);
  for (const std::string precision : {"fp32", "bf16"}) {
    for (const std::string saved_on : {"cuda", "cpu"}) {
      if (saved_on == "cpu" && precision == "bf16") continue;
      SCOPED_TRACE(precision + ", saved on " + saved_on);
      TrainConfig c = small_run(dir, saved_on, precision);
      c.checkpoint.save_dir = dir.file("ckpt-" + precision + "-" + saved_on);
      std::vector<StepMetrics> want;
      {
        Trainer run(c);
        for (std::int64_t step = 1; step <= 4; ++step) run.train_step(step);
        run.save_checkpoint(4);
        for (std::int64_t step = 5; step <= 7; ++step) want.push_back(run.train_step(step));
      }
      c.training.device = "cuda";
      Trainer resumed(c);
      ASSERT_EQ(resumed.load_checkpoint(c.checkpoint.save_dir + "/step_0000004"), 4);
      for (std::int64_t step = 5; step <= 7; ++step) {
        const StepMetrics got = resumed.train_step(step);
        const StepMetrics& w = want[step - 5];
        if (saved_on == "cuda") {
          EXPECT_EQ(got.loss, w.loss) << "step " << step;
          EXPECT_EQ(got.grad_norm, w.grad_norm) << "step " << step;
        } else {
          EXPECT_NEAR(got.loss, w.loss, 1e-4 * std::abs(w.loss)) << "step " << step;
          EXPECT_NEAR(got.grad_norm, w.grad_norm, 1e-3 * w.grad_norm) << "step " << step;
        }
      }
    }
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

// Recomputation on the GPU: selective and full give the losses and gradient norms of the same
// GPU run without (fp32 and bf16, both families; the cuBLASLt GELU epilogue may round the
// first GELU differently from the kernel that recomputes it, within bf16's rounding).
TEST(GpuTraining, RecomputedBlocksComputeWhatTheyComputeWithout) {
  TN_REQUIRE_GPU();
  ScratchDir dir("gpu-recompute");
  testing_support::prepare_builtin(dir, 50000);
  for (const std::string family : {"gpt2", "llama"}) {
    for (const std::string precision : {"fp32", "bf16"}) {
      TrainConfig c = small_run(dir, "cuda", precision);
      c.model.family = family;
      Trainer none(c);
      c.training.recompute = "selective";
      Trainer selective(c);
      c.training.recompute = "full";
      Trainer full(c);
      const double tolerance = precision == "fp32" ? 1e-5 : 1e-2;
      for (std::int64_t step = 1; step <= 6; ++step) {
        const StepMetrics want = none.train_step(step);
        for (Trainer* t : {&selective, &full}) {
          const StepMetrics got = t->train_step(step);
          const std::string label = family + " " + precision + " " +
                                    (t == &full ? "full" : "selective") + " step " +
                                    std::to_string(step);
          EXPECT_NEAR(got.loss, want.loss, tolerance * want.loss) << label;
          EXPECT_NEAR(got.grad_norm, want.grad_norm, 10 * tolerance * want.grad_norm) << label;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ternion::test
