#include <gtest/gtest.h>

#include <cmath>

#include "optimizers/grad_clip.h"
#include "optimizers/lr_schedule.h"
#include "optimizers/optimizer.h"

namespace ternion {
namespace {

OptimizerConfig schedule(double lr, double min_lr, std::int64_t warmup, std::string decay) {
  OptimizerConfig c;
  c.lr = lr;
  c.min_lr = min_lr;
  c.warmup_steps = warmup;
  c.decay = std::move(decay);
  return c;
}

TEST(LrSchedule, LinearWarmupThenCosineTowardsMinLr) {
  OptimizerConfig c = schedule(1.0, 0.1, 10, "cosine");
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 1, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 5, 110), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 10, 110), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 11, 110), 1.0);  // the first step after warm-up: the peak
  EXPECT_NEAR(learning_rate_at(c, 61, 110), 0.55, 1e-12);  // half-way: the mean of lr and min_lr
  // The last step one decay step short of min_lr: 0.1 + 0.9 * 0.5 (1 + cos(pi 99 / 100)).
  EXPECT_NEAR(learning_rate_at(c, 110, 110), 0.1 + 0.45 * (1.0 + std::cos(M_PI * 0.99)), 1e-12);
  EXPECT_GT(learning_rate_at(c, 110, 110), 0.1);
  for (std::int64_t s = 11; s < 110; ++s)
    EXPECT_GT(learning_rate_at(c, s, 110), learning_rate_at(c, s + 1, 110));
}

TEST(LrSchedule, LinearAndConstantDecay) {
  OptimizerConfig linear = schedule(1.0, 0.0, 0, "linear");
  EXPECT_NEAR(learning_rate_at(linear, 1, 4), 1.0, 1e-12);
  EXPECT_NEAR(learning_rate_at(linear, 2, 4), 0.75, 1e-12);
  EXPECT_NEAR(learning_rate_at(linear, 4, 4), 0.25, 1e-12);
  OptimizerConfig constant = schedule(0.3, 0.0, 2, "constant");
  EXPECT_DOUBLE_EQ(learning_rate_at(constant, 1, 9), 0.15);
  EXPECT_DOUBLE_EQ(learning_rate_at(constant, 9, 9), 0.3);
}

// Warm-up, a stable stretch at the peak, then the last decay_steps decaying as the whole
// decay would: the step before the decay and its first step at the peak.
TEST(LrSchedule, WarmupStableDecay) {
  OptimizerConfig c = schedule(1.0, 0.0, 10, "linear");
  c.decay_steps = 20;
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 5, 100), 0.5);
  for (const std::int64_t s : {10, 11, 50, 80, 81})
    EXPECT_DOUBLE_EQ(learning_rate_at(c, s, 100), 1.0);
  EXPECT_NEAR(learning_rate_at(c, 82, 100), 0.95, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 100, 100), 0.05, 1e-12);
  // A longer run keeps its decay at its end.
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 100, 200), 1.0);
  EXPECT_NEAR(learning_rate_at(c, 200, 200), 0.05, 1e-12);
  c.decay = "sqrt";
  EXPECT_NEAR(learning_rate_at(c, 85, 100), 1.0 - std::sqrt(0.2), 1e-12);
  // decay_steps of every step after warm-up is the schedule without a stable stretch.
  OptimizerConfig whole = schedule(1.0, 0.1, 10, "cosine");
  OptimizerConfig explicit_whole = whole;
  explicit_whole.decay_steps = 90;
  for (std::int64_t s = 1; s <= 100; ++s)
    EXPECT_EQ(learning_rate_at(whole, s, 100), learning_rate_at(explicit_whole, s, 100)) << s;
}

// No step at a zero rate unless asked: a one-step run trains at the peak, and three steps of
// cosine from 1e-3 without warm-up run at 1e-3, 7.5e-4 and 2.5e-4.
TEST(LrSchedule, NoStepIsSpentAtTheFinalRate) {
  OptimizerConfig c = schedule(1e-3, 0.0, 0, "cosine");
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 1, 1), 1e-3);
  EXPECT_NEAR(learning_rate_at(c, 1, 3), 1e-3, 1e-15);
  EXPECT_NEAR(learning_rate_at(c, 2, 3), 7.5e-4, 1e-15);
  EXPECT_NEAR(learning_rate_at(c, 3, 3), 2.5e-4, 1e-15);
  OptimizerConfig warm = schedule(1e-3, 0.0, 2, "cosine");
  EXPECT_GT(learning_rate_at(warm, 2, 2), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(warm, 3, 3), 1e-3);  // warm-up, then the peak
}

// The start-up line's phrase names what the run will not reach or not use.
TEST(LrSchedule, DescriptionNamesWhatTheRunNeverUses) {
  EXPECT_EQ(describe_schedule(schedule(6e-4, 6e-5, 100, "cosine"), 1000),
            "lr 0.0006, warm-up 100 steps, cosine to 6e-05");
  EXPECT_EQ(describe_schedule(schedule(1e-3, 0.0, 0, "constant"), 10), "lr 0.001, constant");
  OptimizerConfig wsd = schedule(6e-4, 6e-5, 100, "cosine");
  wsd.decay_steps = 200;
  EXPECT_EQ(describe_schedule(wsd, 1000),
            "lr 0.0006, warm-up 100 steps, stable 700 steps, cosine to 6e-05 over 200 steps");
  EXPECT_EQ(describe_schedule(schedule(1e-3, 1e-4, 0, "constant"), 10),
            "lr 0.001, constant: optimizer.min_lr has no effect");
  EXPECT_EQ(describe_schedule(schedule(1e-3, 1e-4, 10, "linear"), 10),
            "lr 0.001, warm-up 10 steps: the whole run, no decay");
  EXPECT_EQ(describe_schedule(schedule(1e-3, 0.0, 40, "cosine"), 10),
            "lr 0.001, warm-up 40 steps: longer than the run, lr 0.00025 at its last step");
}

TEST(GradClip, NormAndFactor) {
  Parameter a = make_parameter("a", {2}, ParameterInit::Zeros, 0, true);
  Parameter b = make_parameter("b", {1}, ParameterInit::Zeros, 0, false);
  a.grad.copy_from(Tensor::from_vector({3, 0}, {2}));
  b.grad.copy_from(Tensor::from_vector({4}, {1}));
  const double norm = std::sqrt(grad_sum_of_squares({&a, &b}));
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_NEAR(clip_factor(norm, 1.0), 0.2, 1e-6);
  EXPECT_EQ(clip_factor(norm, 10.0), 1.0f);
  EXPECT_EQ(clip_factor(norm, 0.0), 1.0f);  // clipping off
  // As torch.nn.utils.clip_grad_norm_: a norm just below max_norm is scaled by
  // max_norm / (norm + 1e-6), one at or more than 1e-6 below it is left.
  EXPECT_EQ(clip_factor(0.9999995, 1.0), static_cast<float>(1.0 / 1.0000005));
  EXPECT_LT(clip_factor(0.9999995, 1.0), 1.0f);
  EXPECT_EQ(clip_factor(0.999998, 1.0), 1.0f);
}

// AdamW through the Optimizer interface against a scalar reference: decay only where flagged.
TEST(AdamWOptimizer, MatchesTheReferenceAndDecaysOnlyFlaggedParameters) {
  OptimizerConfig c;
  c.type = "adamw";
  c.weight_decay = 0.1;
  Parameter w = make_parameter("w", {1}, ParameterInit::Zeros, 0, /*weight_decay=*/true);
  Parameter b = make_parameter("b", {1}, ParameterInit::Zeros, 0, /*weight_decay=*/false);
  w.value.fill(1.0f);
  b.value.fill(1.0f);
  auto opt = make_optimizer(c, whole_parameters({&w, &b}));
  EXPECT_EQ(opt->state_bytes(), 16u);
  double ref_w = 1.0, ref_b = 1.0, m = 0.0, v = 0.0;
  const double lr = 0.01, g = 0.5, scale = 0.5;
  for (std::int64_t t = 1; t <= 3; ++t) {
    w.grad.fill(static_cast<float>(g));
    b.grad.fill(static_cast<float>(g));
    opt->step(static_cast<float>(lr), static_cast<float>(scale), t);
    const double gs = g * scale;
    m = c.beta1 * m + (1 - c.beta1) * gs;
    v = c.beta2 * v + (1 - c.beta2) * gs * gs;
    const double update = m / (1 - std::pow(c.beta1, t)) /
                          (std::sqrt(v / (1 - std::pow(c.beta2, t))) + c.eps);
    ref_w -= lr * (update + c.weight_decay * ref_w);
    ref_b -= lr * update;
  }
  EXPECT_NEAR(w.value.to_vector()[0], ref_w, 1e-6);
  EXPECT_NEAR(b.value.to_vector()[0], ref_b, 1e-6);
  EXPECT_LT(w.value.to_vector()[0], b.value.to_vector()[0]);
}

TEST(SgdOptimizer, MomentumMatchesTheReference) {
  OptimizerConfig c;
  c.type = "sgd";
  c.momentum = 0.9;
  c.weight_decay = 0.0;
  Parameter p = make_parameter("p", {1}, ParameterInit::Zeros, 0, true);
  p.value.fill(2.0f);
  auto opt = make_optimizer(c, whole_parameters({&p}));
  double ref = 2.0, buf = 0.0;
  for (std::int64_t t = 1; t <= 3; ++t) {
    p.grad.fill(1.0f);
    opt->step(0.1f, 1.0f, t);
    buf = 0.9 * buf + 1.0;
    ref -= 0.1 * buf;
  }
  EXPECT_NEAR(p.value.to_vector()[0], ref, 1e-6);
}

}  // namespace
}  // namespace ternion
