// The trainer end to end on one rank: it learns, it is deterministic, and it logs what it
// says it logs.
#include "training/trainer.h"

#include <gtest/gtest.h>

#include "framework/strict_json.h"

#include <atomic>
#include <csignal>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>

#include "data/builtin_corpus.h"
#include "trainer_state.h"
#include "training_test_support.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;

TrainConfig small_run(const ScratchDir& dir, std::int64_t steps) {
  TrainConfig c;
  c.model.seq_len = 32;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.d_model = 64;
  c.parallel.micro_batch_size = 8;
  c.training.steps = steps;
  c.training.global_batch_size = 16;
  c.training.eval_batches = 1;
  c.optimizer.lr = 3e-3;
  c.optimizer.warmup_steps = 5;
  c.optimizer.min_lr = 3e-4;
  c.data.train = dir.file("train.bin");
  c.data.val = dir.file("val.bin");
  return c;
}

// The learning test: a tiny GPT on the built-in corpus lowers its loss by a clear margin.
TEST(Trainer, LearnsTheBuiltInCorpus) {
  ScratchDir dir("learn");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_run(dir, 60);
  Trainer trainer(c);
  const double val_before = trainer.evaluate();
  EXPECT_NEAR(val_before, std::log(256.0), 0.3);  // an untrained model is near uniform
  double first = 0.0, last = 0.0;
  for (std::int64_t step = 1; step <= c.training.steps; ++step) {
    StepMetrics m = trainer.train_step(step);
    ASSERT_TRUE(std::isfinite(m.loss)) << "step " << step;
    if (step == 1) first = m.loss;
    last = m.loss;
  }
  const double val_after = trainer.evaluate();
  EXPECT_LT(last, first - 2.0) << "first " << first << " last " << last;
  EXPECT_LT(val_after, val_before - 2.0);
}

TEST(Trainer, SameConfigSameLossesAndMicroBatchingDoesNotChangeThem) {
  ScratchDir dir("determinism");
  testing_support::prepare_builtin(dir, 50000);
  TrainConfig c = small_run(dir, 3);
  c.model.dropout = 0.1;
  c.training.eval_batches = 2;
  std::vector<double> a, b, split;
  double val_a = 0, val_split = 0;
  {
    Trainer t(c);
    for (int s = 1; s <= 3; ++s) a.push_back(t.train_step(s).loss);
    val_a = t.evaluate();
  }
  {
    Trainer t(c);
    for (int s = 1; s <= 3; ++s) b.push_back(t.train_step(s).loss);
  }
  c.parallel.micro_batch_size = 2;  // 8 micro-batches instead of 2: the same run
  {
    Trainer t(c);
    for (int s = 1; s <= 3; ++s) split.push_back(t.train_step(s).loss);
    val_split = t.evaluate();  // the same windows of data.val
  }
  EXPECT_EQ(a, b);
  for (int s = 0; s < 3; ++s) EXPECT_NEAR(split[s], a[s], 1e-5 * a[s]) << "step " << s + 1;
  EXPECT_NEAR(val_split, val_a, 1e-6 * val_a);
}

TEST(Trainer, RunWritesOneMetricsLinePerStepWithValidationOnEvalSteps) {
  ScratchDir dir("metrics");
  testing_support::prepare_builtin(dir, 50000);
  TrainConfig c = small_run(dir, 4);
  c.training.eval_interval = 2;
  c.logging.metrics_file = dir.file("out/metrics.jsonl");
  Trainer trainer(c);
  trainer.run();
  std::ifstream in(c.logging.metrics_file);
  ASSERT_TRUE(in.good());
  EXPECT_FALSE(std::filesystem::exists(c.logging.metrics_file + ".partial"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  for (int s = 0; s < 4; ++s) {
    const std::string& line = lines[s];
    const Json record = Json::parse(line);
    EXPECT_EQ(line.rfind("{\"step\":", 0), 0u) << line;  // first, for a person reading the file
    EXPECT_EQ(record.value("step", -1), s + 1) << line;
    for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_s", "tflops_per_rank",
                            "forward_backward_ms", "forward_ms", "grad_sync_ms", "optimizer_ms"})
      EXPECT_TRUE(record.contains(key) && record[key].is_number()) << key << " in " << line;
    EXPECT_EQ(record.contains("val_loss"), s % 2 == 1) << line;
  }
}

// Model TFLOP/s per rank is the model's training FLOPs for the step's tokens over the step's
// time; MFU is that over logging.peak_tflops, reported only where it is given.
TEST(Trainer, StepRateIsTheModelsFlopsOverTheStepsTime) {
  ScratchDir dir("flops");
  testing_support::prepare_builtin(dir, 50000);
  TrainConfig c = small_run(dir, 1);
  const double step_flops = training_flops_per_token(c.model) *
                            static_cast<double>(c.training.global_batch_size * c.model.seq_len);
  EXPECT_NEAR(step_flops / static_cast<double>(c.training.global_batch_size * c.model.seq_len),
              3.0 * forward_flops_per_token(c.model), 1e-9 * step_flops);
  for (const double peak : {0.0, 0.25}) {
    c.logging.peak_tflops = peak;
    Trainer trainer(c);
    const StepMetrics m = trainer.train_step(1);
    ASSERT_GT(m.tflops_per_rank, 0.0);
    EXPECT_NEAR(m.tflops_per_rank, step_flops / (m.ms_per_step / 1e3) / 1e12,
                1e-9 * m.tflops_per_rank);
    EXPECT_EQ(m.mfu_percent.has_value(), peak > 0);
    if (m.mfu_percent) {
      EXPECT_NEAR(*m.mfu_percent, 100 * m.tflops_per_rank / peak, 1e-9);
    }
    const Json record = Json::parse(metrics_json(m));
    EXPECT_EQ(record.at("tflops_per_rank"), m.tflops_per_rank);
    EXPECT_EQ(record.contains("mfu_percent"), peak > 0);
  }
}

// The step's phases: each took time, the forwards are part of the forward-backward, and the
// phases fit in the step.
TEST(Trainer, StepPhasesAddUpWithinTheStep) {
  ScratchDir dir("phases");
  testing_support::prepare_builtin(dir, 50000);
  Trainer trainer(small_run(dir, 2));
  for (std::int64_t step = 1; step <= 2; ++step) {
    const StepMetrics m = trainer.train_step(step);
    ASSERT_TRUE(m.forward_ms.has_value());
    EXPECT_GT(*m.forward_ms, 0.0);
    EXPECT_GT(m.forward_backward_ms, *m.forward_ms);
    EXPECT_GE(m.grad_sync_ms, 0.0);
    EXPECT_GT(m.optimizer_ms, 0.0);
    EXPECT_LE(m.forward_backward_ms + m.grad_sync_ms + m.optimizer_ms, m.ms_per_step);
  }
}

TEST(Trainer, GeneratesTheRequestedNumberOfBytes) {
  ScratchDir dir("generate");
  testing_support::prepare_builtin(dir, 50000);
  Trainer trainer(small_run(dir, 1));
  SampleOptions options;
  options.prompt = "The ";
  options.max_tokens = 20;
  options.seed = 3;
  const std::string text = trainer.generate(options);
  EXPECT_EQ(text.size(), 20u);
  EXPECT_EQ(text, trainer.generate(options));  // seeded
  options.top_k = 1;  // greedy: also deterministic, and no crash at the edge
  EXPECT_EQ(trainer.generate(options).size(), 20u);
}

TEST(Trainer, TokensOutsideTheVocabularyAreADataError) {
  ScratchDir dir("vocab");
  testing_support::prepare_builtin(dir, 50000);
  TrainConfig c = small_run(dir, 1);
  c.model.vocab_size = 100;  // the corpus has bytes above 100 ('e' is 101)
  try {
    Trainer trainer(c);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("model.vocab_size"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("train.bin"), std::string::npos) << e.what();
  }
}

TEST(Trainer, NonFiniteGradientsSkipTheUpdate) {
  ScratchDir dir("nan");
  testing_support::prepare_builtin(dir, 50000);
  Trainer trainer(small_run(dir, 2));
  ASSERT_FALSE(trainer.train_step(1).skipped);  // the optimizer state is no longer zero
  std::vector<Parameter*> params = trainer.model().parameters();
  Parameter* ln = params[params.size() - 2];  // ln_f.weight
  ASSERT_EQ(ln->name, "ln_f.weight");
  ln->value.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  const auto before = test::trainer_state_bits(trainer);
  StepMetrics m = trainer.train_step(2);
  EXPECT_TRUE(m.skipped);
  EXPECT_FALSE(std::isfinite(m.grad_norm));
  // Nothing was applied: every parameter and every optimizer state tensor as it was.
  EXPECT_EQ(test::changed_state(before, test::trainer_state_bits(trainer)),
            std::vector<std::string>{});
  EXPECT_GT(before.size(), params.size());  // the optimizer's state was compared too
  const Json record = Json::parse(metrics_json(m));
  EXPECT_EQ(record.value("skipped", false), true);
  EXPECT_TRUE(record["grad_norm"].is_null());  // JSON has no NaN
}

// A gradient norm past 1.8e19 (its square past f32's range) is finite in one rank's double
// sum but not where the layouts reduce it in f32 parts: every layout skips it, one rank too.
TEST(Trainer, AGradientNormPastF32sRangeSkipsTheUpdate) {
  ScratchDir dir("huge_norm");
  testing_support::prepare_builtin(dir, 50000);
  Trainer trainer(small_run(dir, 1));
  std::vector<Parameter*> params = trainer.model().parameters();
  Parameter* ln = params[params.size() - 2];  // ln_f.weight: scales the head's input
  ASSERT_EQ(ln->name, "ln_f.weight");
  ln->value.fill(1e20f);
  const auto before = test::trainer_state_bits(trainer);
  const StepMetrics m = trainer.train_step(1);
  EXPECT_TRUE(std::isfinite(m.loss)) << m.loss;
  EXPECT_TRUE(m.skipped);
  EXPECT_FALSE(std::isfinite(m.grad_norm));
  EXPECT_EQ(test::changed_state(before, test::trainer_state_bits(trainer)),
            std::vector<std::string>{});
}

// AdamW's bias correction counts the updates applied, as PyTorch's and Megatron's do: after a
// skipped first step, the first update is a first update (each element moves by the learning
// rate, m_hat / sqrt(v_hat) being the gradient's sign), not a second one (0.735 of it).
TEST(Trainer, ASkippedStepIsNotCountedByAdamW) {
  ScratchDir dir("skipped_first");
  testing_support::prepare_builtin(dir, 50000);
  TrainConfig c = small_run(dir, 2);
  c.training.eval_interval = 0;
  Trainer trainer(c);
  std::vector<Parameter*> params = trainer.model().parameters();
  Parameter* ln = params[params.size() - 2];  // ln_f.weight: no weight decay
  ASSERT_EQ(ln->name, "ln_f.weight");
  const float kept = ln->value.data<float>()[0];
  ln->value.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(trainer.train_step(1).skipped);
  ln->value.data<float>()[0] = kept;
  const std::vector<float> before = ln->value.to_vector();
  const StepMetrics m = trainer.train_step(2);
  ASSERT_FALSE(m.skipped);
  const std::vector<float> after = ln->value.to_vector();
  int moved = 0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const double step = std::abs(static_cast<double>(after[i]) - before[i]);
    if (step < 1e-3 * m.lr) continue;  // a gradient near eps
    EXPECT_NEAR(step, m.lr, 0.01 * m.lr) << "element " << i;  // eps and rounding: < 1%
    ++moved;
  }
  EXPECT_GT(moved, static_cast<int>(before.size()) / 2);
}

// A `steps`-step run on the built-in corpus whose ln_f.weight holds a NaN that no skipped
// update can mend: every step's gradients are non-finite.
std::unique_ptr<Trainer> trainer_with_a_nan_weight(const ScratchDir& dir, std::int64_t steps) {
  testing_support::prepare_builtin(dir, 50000);
  TrainConfig c = small_run(dir, steps);
  c.training.eval_interval = 0;
  auto trainer = std::make_unique<Trainer>(c);
  std::vector<Parameter*> params = trainer->model().parameters();
  params[params.size() - 2]->value.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  return trainer;
}

// Gradients that stay non-finite (a NaN weight that no skipped update can mend) stop the run
// after 10 skipped steps in a row, with the steps named, instead of skipping to the end.
TEST(Trainer, ARunThatKeepsSkippingStops) {
  ScratchDir dir("nan-run");
  std::unique_ptr<Trainer> trainer = trainer_with_a_nan_weight(dir, 30);
  try {
    trainer->run();
    FAIL() << "the run went on";
  } catch (const TrainingError& e) {
    EXPECT_NE(std::string(e.what()).find("steps 1 to 10 all had non-finite gradients"),
              std::string::npos) << e.what();
  }
}

// A run that ends with skipped steps (fewer than 10 in a row) says so at its end.
TEST(Trainer, SkippedStepsAreCountedAtTheEnd) {
  ScratchDir dir("nan-end");
  std::unique_ptr<Trainer> trainer = trainer_with_a_nan_weight(dir, 3);
  testing::internal::CaptureStdout();
  trainer->run();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("ternion: warning: 3 of 3 steps were skipped (non-finite gradients, no "
                     "update applied), the last among them: the run may be diverging"),
            std::string::npos)
      << out;
}

// A stop signal that lands in the last step stops nothing: the run has finished (exit status
// 0 and its final sample), not "stopped after step N". The stop handler is called from another
// thread as soon as the run installs it, so the signal comes during the run's only step.
TEST(Trainer, ASignalInTheLastStepLetsTheRunFinish) {
  ScratchDir dir("signal_last_step");
  testing_support::prepare_builtin(dir);
  TrainConfig c = small_run(dir, 1);
  c.model.d_model = 256;  // a step long enough for the handler to be called within it
  c.model.seq_len = 128;
  Trainer trainer(c);
  std::atomic<bool> done{false};
  std::thread signaller([&done] {
    while (!done) {
      struct sigaction installed {};
      sigaction(SIGTERM, nullptr, &installed);
      if (installed.sa_handler != SIG_DFL && installed.sa_handler != SIG_IGN) {
        installed.sa_handler(SIGTERM);  // as the signal would, without a signal to race
        return;
      }
    }
  });
  testing::internal::CaptureStderr();
  trainer.run();
  done = true;
  signaller.join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("signal received"), std::string::npos) << "the handler was never called";
  EXPECT_FALSE(trainer.stopped_early());
  std::signal(SIGTERM, SIG_DFL);
}

TEST(Trainer, DurationFormat) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(125), "2:05");
  EXPECT_EQ(format_duration(3725), "1:02:05");
}

}  // namespace
}  // namespace ternion
