// The Llama family trained on one rank against an independent double-precision reference
// (llama_reference.h: Hugging Face LlamaForCausalLM's formulas, a hand-written backward, global
// norm clipping and AdamW written out here). Both start from the trainer's initial weights and
// see the sampler's batches; every step's loss and gradient norm, and every weight after the
// last step, must agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "data/batch_sampler.h"
#include "data/token_shard.h"
#include "llama_reference.h"
#include "test_util.h"
#include "training/trainer.h"
#include "training_test_support.h"

namespace ternion {
namespace {

using llama_reference::Model;
using llama_reference::Tensors;
using testing_support::ScratchDir;

constexpr std::int64_t kVocab = 48;
// Tokens drawn from [0, kTokensUsed): the embedding rows above never see a gradient, only
// weight decay, and the softmax still covers them.
constexpr std::int64_t kTokensUsed = 44;
constexpr double kTolerance = 1e-5;
// Gradient norms here run from about 3 to 5.5: clipping at this takes some steps, not all.
constexpr double kGradClip = 3.5;

void write_tokens(const ScratchDir& dir) {
  const std::vector<std::int32_t> drawn = test::random_ints(3000, 2024, 0, kTokensUsed);
  const std::vector<std::uint16_t> tokens(drawn.begin(), drawn.end());
  write_token_file(dir.file("train.bin"), tokens);
}

// A tiny Llama: vocabulary padded 48 -> 64, grouped-query attention unless kv_heads == n_head,
// two micro-batches per step, AdamW at a constant rate with weight decay, clipping at `clip`.
TrainConfig llama_run(const ScratchDir& dir, std::int64_t kv_heads, bool tied, double rope_theta,
                      double clip, std::int64_t steps) {
  TrainConfig c;
  c.model.family = "llama";
  c.model.vocab_size = kVocab;
  c.model.vocab_pad_multiple = 16;
  c.model.seq_len = 8;
  c.model.n_layer = 2;
  c.model.d_model = 16;
  c.model.n_head = 4;
  c.model.n_kv_head = kv_heads;
  c.model.d_ff = 24;
  c.model.rope_theta = rope_theta;
  c.model.norm_eps = 1e-5;
  c.model.tie_embeddings = tied;
  c.model.dropout = 0.0;
  // Weights large enough that attention is far from uniform, so rotary positions and the
  // grouping of heads show in the loss.
  c.model.init_std = 0.3;
  c.parallel.micro_batch_size = 2;
  c.training.global_batch_size = 4;
  c.training.steps = steps;
  c.training.sample_tokens = 0;
  c.optimizer.type = "adamw";
  c.optimizer.lr = 1e-2;
  c.optimizer.warmup_steps = 0;
  c.optimizer.decay = "constant";
  c.optimizer.weight_decay = 0.1;
  c.optimizer.grad_clip = clip;
  c.optimizer.beta1 = 0.9;
  c.optimizer.beta2 = 0.95;
  c.optimizer.eps = 1e-8;
  c.data.train = dir.file("train.bin");
  return c;
}

llama_reference::Config reference_config(const ModelConfig& m) {
  llama_reference::Config c;
  c.vocab = m.vocab_size;
  c.padded_vocab = m.padded_vocab_size();
  c.n_layer = m.n_layer;
  c.d_model = m.d_model;
  c.n_head = m.n_head;
  c.n_kv_head = m.kv_heads();
  c.d_ff = m.ff_width();
  c.rope_theta = m.rope_theta;
  c.rope_factor = m.rope_scaling_factor;
  c.rope_low = m.rope_scaling_low_freq_factor;
  c.rope_high = m.rope_scaling_high_freq_factor;
  c.rope_original_context = static_cast<double>(m.rope_scaling_original_context);
  c.norm_eps = m.norm_eps;
  c.tied = m.tie_embeddings;
  return c;
}

std::vector<int> ints(const Tensor& t, std::int64_t row) {
  const std::int64_t n = t.size(1);
  const std::int32_t* p = t.data<std::int32_t>() + row * n;
  return std::vector<int>(p, p + n);
}

// The trainer's weights in double, after checking that it holds exactly the reference's
// parameters, with their shapes and weight-decay flags.
Tensors copy_parameters(const Trainer& trainer, const llama_reference::Config& config) {
  Tensors params;
  std::set<std::string> expected;
  for (const auto& [name, shape] : llama_reference::parameter_shapes(config)) {
    expected.insert(name);
    const auto found = std::find_if(trainer.parameters().begin(), trainer.parameters().end(),
                                    [&](const Parameter* p) { return p->name == name; });
    if (found == trainer.parameters().end()) {
      ADD_FAILURE() << "the trainer has no parameter " << name;
      continue;
    }
    EXPECT_EQ((*found)->value.shape(), shape) << name;
    EXPECT_EQ((*found)->weight_decay, llama_reference::decays(name)) << name;
    const std::vector<float> values = (*found)->value.to_vector();
    params[name] = std::vector<double>(values.begin(), values.end());
  }
  for (const Parameter* p : trainer.parameters())
    EXPECT_TRUE(expected.count(p->name)) << "unexpected parameter " << p->name;
  return params;
}

// What the reference trainer reports for one step.
struct ReferenceStep {
  double loss = 0, grad_norm = 0;
  bool clipped = false;
};

// One-rank training in double: the mean loss over the global batch's valid targets, its exact
// gradient, the global L2 norm, clipping and AdamW as the optimizer section describes them.
class ReferenceTrainer {
 public:
  ReferenceTrainer(const TrainConfig& config, Tensors params)
      : train_(config), model_config_(reference_config(config.model)),
        params_(std::move(params)) {
    for (const auto& [name, values] : params_) {
      m_[name].assign(values.size(), 0.0);
      v_[name].assign(values.size(), 0.0);
    }
  }

  // The gradient of the mean loss over `batches` (and the loss), at the current weights.
  double gradient(const std::vector<TokenBatch>& batches, Tensors& grads) const {
    double valid = 0;
    for (const TokenBatch& b : batches)
      for (std::int64_t i = 0; i < b.targets.numel(); ++i)
        valid += b.targets.data<std::int32_t>()[i] >= 0;
    const Model model(model_config_, params_);
    double loss_sum = 0;
    grads.clear();
    for (const TokenBatch& b : batches)
      for (std::int64_t row = 0; row < b.inputs.size(0); ++row)
        loss_sum += model.sequence_loss(ints(b.inputs, row), ints(b.targets, row), 1.0 / valid,
                                        &grads);
    return loss_sum / valid;
  }

  double loss(const std::vector<TokenBatch>& batches) const {
    double valid = 0, loss_sum = 0;
    const Model model(model_config_, params_);
    for (const TokenBatch& b : batches)
      for (std::int64_t row = 0; row < b.inputs.size(0); ++row) {
        const std::vector<int> targets = ints(b.targets, row);
        for (int t : targets) valid += t >= 0;
        loss_sum += model.sequence_loss(ints(b.inputs, row), targets, 0.0, nullptr);
      }
    return loss_sum / valid;
  }

  ReferenceStep step(std::int64_t step, const std::vector<TokenBatch>& batches) {
    ReferenceStep out;
    Tensors grads;
    out.loss = gradient(batches, grads);
    double squares = 0;
    for (const auto& [name, g] : grads)
      for (double x : g) squares += x * x;
    out.grad_norm = std::sqrt(squares);
    const OptimizerConfig& o = train_.optimizer;
    double scale = 1.0;
    if (o.grad_clip > 0 && out.grad_norm > o.grad_clip) {
      scale = o.grad_clip / (out.grad_norm + 1e-6);
      out.clipped = true;
    }
    const double lr = o.lr;  // warmup_steps 0, decay constant
    const double correction1 = 1 - std::pow(o.beta1, static_cast<double>(step));
    const double correction2 = 1 - std::pow(o.beta2, static_cast<double>(step));
    for (auto& [name, p] : params_) {
      const std::vector<double>& g = grads.at(name);
      std::vector<double>&m = m_.at(name), &v = v_.at(name);
      const double decay = llama_reference::decays(name) ? o.weight_decay : 0.0;
      for (std::size_t i = 0; i < p.size(); ++i) {
        const double gi = g[i] * scale;
        m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
        v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
        const double m_hat = m[i] / correction1, v_hat = v[i] / correction2;
        p[i] -= lr * (m_hat / (std::sqrt(v_hat) + o.eps) + decay * p[i]);
      }
    }
    return out;
  }

  Tensors& params() { return params_; }
  const llama_reference::Config& model_config() const { return model_config_; }

 private:
  TrainConfig train_;
  llama_reference::Config model_config_;
  Tensors params_, m_, v_;
};

// The global batch of step `step`, micro-batch by micro-batch as the one-rank trainer draws it.
std::vector<TokenBatch> step_batches(const BatchSampler& sampler, const TrainConfig& c,
                                     std::int64_t step) {
  const std::int64_t micro = c.parallel.micro_batch_size;
  std::vector<TokenBatch> batches;
  for (std::int64_t m = 0; m < c.training.global_batch_size / micro; ++m)
    batches.push_back(sampler.sample(step, m * micro, micro));
  return batches;
}

double max_abs(const std::vector<double>& values) {
  double peak = 0;
  for (double v : values) peak = std::max(peak, std::fabs(v));
  return peak;
}

// Trains `steps` steps on the trainer and on the reference, comparing as it goes; returns the
// number of steps the reference clipped.
int train_both(const TrainConfig& config) {
  Trainer trainer(config);
  ReferenceTrainer reference(config, copy_parameters(trainer, reference_config(config.model)));
  const TokenDataset data = TokenDataset::open("data.train", config.data.train);
  const BatchSampler sampler(data, config.model.seq_len,
                             static_cast<std::uint64_t>(config.training.seed), "data.train");
  int clipped = 0;
  for (std::int64_t step = 1; step <= config.training.steps; ++step) {
    const StepMetrics got = trainer.train_step(step);
    const ReferenceStep want = reference.step(step, step_batches(sampler, config, step));
    clipped += want.clipped;
    EXPECT_FALSE(got.skipped) << "step " << step;
    EXPECT_NEAR(got.loss, want.loss, kTolerance * want.loss) << "loss at step " << step;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, kTolerance * want.grad_norm)
        << "gradient norm at step " << step;
  }
  // The parameters after the steps, each within kTolerance of the reference's in the L2 norm:
  // AdamW's normalised update turns a rounding-level difference in an element's gradient near
  // zero into a visible step of that one element (which element depends on the BLAS's
  // summation order), while a wrong gradient moves many elements.
  for (const Parameter* p : trainer.parameters()) {
    const std::vector<double>& want = reference.params().at(p->name);
    const std::vector<float> got = p->value.to_vector();
    EXPECT_EQ(got.size(), want.size()) << p->name;
    if (got.size() != want.size()) continue;
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      diff += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
    EXPECT_LE(std::sqrt(diff), kTolerance * std::sqrt(norm))
        << p->name << " after step " << config.training.steps << ": |got - want| "
        << std::sqrt(diff) << ", |want| " << std::sqrt(norm);
  }
  return clipped;
}

// The oracle itself: its backward against central differences of its own forward, on every
// weight of the initial model and the first step's batch.
TEST(LlamaReference, BackwardMatchesCentralDifferences) {
  ScratchDir dir("llama-reference-fd");
  write_tokens(dir);
  const TrainConfig config = llama_run(dir, 2, /*tied=*/false, 100.0, kGradClip, 1);
  Trainer trainer(config);
  ReferenceTrainer reference(config, copy_parameters(trainer, reference_config(config.model)));
  const TokenDataset data = TokenDataset::open("data.train", config.data.train);
  const BatchSampler sampler(data, config.model.seq_len,
                             static_cast<std::uint64_t>(config.training.seed), "data.train");
  const std::vector<TokenBatch> batches = step_batches(sampler, config, 1);
  Tensors grads;
  reference.gradient(batches, grads);
  for (auto& [name, values] : reference.params()) {
    const std::vector<double> numeric =
        test::finite_difference_gradient(values, [&] { return reference.loss(batches); }, 1e-5);
    const std::vector<double>& analytic = grads.at(name);
    EXPECT_TRUE(test::close_to(name, analytic, numeric, 1e-7 * max_abs(numeric), 1e-6));
  }
}

void expect_some_steps_clipped(int clipped, std::int64_t steps) {
  EXPECT_GT(clipped, 0) << "grad_clip never took effect: the test does not cover clipping";
  EXPECT_LT(clipped, steps) << "every step was clipped: the unclipped path is not covered";
}

// Grouped-query attention (two query heads per key/value head), an untied head, four steps.
TEST(LlamaReference, GroupedQueryUntiedTrainsAsTheReference) {
  ScratchDir dir("llama-reference-gqa");
  write_tokens(dir);
  expect_some_steps_clipped(train_both(llama_run(dir, 2, /*tied=*/false, 10000.0, kGradClip, 4)),
                            4);
}

// Plain multi-head attention (n_kv_head == n_head) with the head tied to the embedding.
TEST(LlamaReference, MultiHeadTiedTrainsAsTheReference) {
  ScratchDir dir("llama-reference-tied");
  write_tokens(dir);
  expect_some_steps_clipped(train_both(llama_run(dir, 4, /*tied=*/true, 100.0, kGradClip, 2)), 2);
}

// The initial model's logits over one sequence, without the loss in between; the padding
// columns are no model output and are not compared.
TEST(LlamaReference, LogitsMatchTheReferenceForward) {
  ScratchDir dir("llama-reference-logits");
  write_tokens(dir);
  for (const bool tied : {false, true}) {
    const TrainConfig config = llama_run(dir, tied ? 4 : 2, tied, 10000.0, kGradClip, 1);
    Trainer trainer(config);
    const llama_reference::Config ref_config = reference_config(config.model);
    const Tensors params = copy_parameters(trainer, ref_config);
    const std::vector<std::int32_t> tokens = test::random_ints(8, 7, 0, kVocab);
    MicroBatchInfo info;
    info.training = false;
    ActivationContext ctx(info);
    const Tensor logits = trainer.model().logits(test::i32_tensor(tokens, {1, 8}), ctx);
    ASSERT_EQ(logits.shape(), (Shape{1, 8, config.model.padded_vocab_size()}));
    const std::vector<float> all = logits.to_vector();
    std::vector<double> got, want;
    const std::vector<std::vector<double>> reference =
        Model(ref_config, params).logits(std::vector<int>(tokens.begin(), tokens.end()));
    for (std::int64_t t = 0; t < 8; ++t)
      for (std::int64_t v = 0; v < kVocab; ++v) {
        got.push_back(all[t * config.model.padded_vocab_size() + v]);
        want.push_back(reference[t][v]);
      }
    EXPECT_TRUE(test::close_to(tied ? "tied multi-head logits" : "grouped-query logits", got,
                               want, kTolerance * max_abs(want), 0.0));
  }
}

// Llama 3's rotary scaling: with an original context of 8, this model's heads of 4 have one
// pair blended and one slowed (frequencies 1 and 0.01), and the logits follow the reference's
// scaled frequencies, not the plain ones (which differ by far more than the tolerance).
TrainConfig scaled_run(const ScratchDir& dir, std::int64_t steps) {
  TrainConfig config = llama_run(dir, 2, /*tied=*/false, 10000.0, kGradClip, steps);
  config.model.rope_scaling_factor = 8;
  config.model.rope_scaling_original_context = 8;
  return config;
}

TEST(LlamaReference, ScaledRotaryLogitsMatchTheReference) {
  ScratchDir dir("llama-reference-scaled");
  write_tokens(dir);
  const TrainConfig config = scaled_run(dir, 1);
  Trainer trainer(config);
  const llama_reference::Config scaled = reference_config(config.model);
  llama_reference::Config plain = scaled;
  plain.rope_factor = 0;
  const Tensors params = copy_parameters(trainer, scaled);
  const std::vector<std::int32_t> tokens = test::random_ints(8, 9, 0, kVocab);
  MicroBatchInfo info;
  info.training = false;
  ActivationContext ctx(info);
  const std::vector<float> all =
      trainer.model().logits(test::i32_tensor(tokens, {1, 8}), ctx).to_vector();
  const std::vector<int> ids(tokens.begin(), tokens.end());
  const auto want = Model(scaled, params).logits(ids), unscaled = Model(plain, params).logits(ids);
  std::vector<double> got, expected, plain_logits;
  for (std::int64_t t = 0; t < 8; ++t)
    for (std::int64_t v = 0; v < kVocab; ++v) {
      got.push_back(all[t * config.model.padded_vocab_size() + v]);
      expected.push_back(want[t][v]);
      plain_logits.push_back(unscaled[t][v]);
    }
  const double tolerance = kTolerance * max_abs(expected);
  EXPECT_TRUE(test::close_to("scaled rotary logits", got, expected, tolerance, 0.0));
  double apart = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i)
    apart = std::max(apart, std::abs(plain_logits[i] - expected[i]));
  EXPECT_GT(apart, 100 * tolerance) << "the scaling does not show in these logits";
}

// ...and trains as the reference (the backward turns by the same scaled frequencies).
TEST(LlamaReference, ScaledRotaryTrainsAsTheReference) {
  ScratchDir dir("llama-reference-scaled-train");
  write_tokens(dir);
  train_both(scaled_run(dir, 3));
}

}  // namespace
}  // namespace ternion
