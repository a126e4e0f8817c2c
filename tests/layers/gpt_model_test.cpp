// The layers composed: the model's analytic gradients against finite differences of its own
// loss, micro-batch accumulation, the loss weight given at forward time, dropout determinism,
// parameter naming and counts.
// (Each kernel's backward is checked in double precision in tests/kernels; here the question
// is whether the layers wire them together correctly, so float and directional derivatives
// suffice.)
#include "layers/gpt_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "framework/philox.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.vocab_pad_multiple = 8;  // 32 rows, 3 of them padding
  c.seq_len = 7;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 12;
  c.d_ff = 20;
  c.init_std = 0.2;  // larger than GPT-2's, so every path carries a visible gradient
  return c;
}

Tensor random_tokens(std::int64_t batch, std::int64_t seq, std::int64_t vocab, std::uint64_t seed) {
  Tensor t = Tensor::empty({batch, seq}, DType::I32);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<std::int32_t>()[i] = static_cast<std::int32_t>(
        philox_bits({seed, 99}, static_cast<std::uint64_t>(i)).v[0] % vocab);
  return t;
}

double loss_of(GptModel& model, const Tensor& tokens, const Tensor& targets, bool training,
               std::int64_t step = 1) {
  MicroBatchInfo info;
  info.training = training;
  info.step = step;
  info.seed = 5;
  ActivationContext ctx(info);
  return model.forward(tokens, targets, ctx);
}

TEST(GptModel, GradientsMatchFiniteDifferencesOfTheLoss) {
  GptModel model(tiny_config());
  model.initialize(3);
  const Tensor tokens = random_tokens(2, 7, 29, 1), targets = random_tokens(2, 7, 29, 2);
  const float weight = 1.0f / 14.0f;

  model.zero_grad();
  MicroBatchInfo info;
  ActivationContext ctx(info);
  model.forward(tokens, targets, ctx);
  model.backward(weight, ctx);
  EXPECT_TRUE(ctx.empty());

  // For each parameter, the derivative along a random direction d of that parameter alone:
  // (L(p + eps d) - L(p - eps d)) / (2 eps) must equal <grad, d>.
  for (Parameter* p : model.parameters()) {
    const std::vector<float> original = p->value.to_vector();
    const std::vector<float> grad = p->grad.to_vector();
    std::vector<float> direction(original.size());
    double analytic = 0.0;
    for (std::size_t i = 0; i < original.size(); ++i) {
      direction[i] = philox_normal({11, hash_name(p->name)}, i);
      // Padding rows of the embedding never touch the loss: their gradient must be zero.
      analytic += double(grad[i]) * direction[i];
    }
    const float eps = 2e-3f;
    auto loss_at = [&](float sign) {
      std::vector<float> moved(original);
      for (std::size_t i = 0; i < moved.size(); ++i) moved[i] += sign * eps * direction[i];
      p->value.copy_from(Tensor::from_vector(moved, p->value.shape()));
      return loss_of(model, tokens, targets, false) * weight;
    };
    const double numeric = (loss_at(1) - loss_at(-1)) / (2.0 * eps);
    p->value.copy_from(Tensor::from_vector(original, p->value.shape()));
    const double scale = std::max(std::abs(numeric), 1e-3);
    EXPECT_LT(std::abs(analytic - numeric) / scale, 1e-2)
        << p->name << ": analytic " << analytic << " numeric " << numeric;
  }
}

// With the loss weight known at forward time the head computes the logits' gradient in the
// forward's pass: the same losses and gradients to rounding (the CPU's fused cross-entropy
// takes each exponential once); a backward with another weight is refused.
TEST(GptModel, LossWeightKnownAtForwardGivesTheSameGradients) {
  const Tensor tokens = random_tokens(2, 7, 29, 1), targets = random_tokens(2, 7, 29, 2);
  const float weight = 1.0f / 14.0f;
  auto run = [&](bool weight_at_forward) {
    GptModel model(tiny_config());
    model.initialize(3);
    model.zero_grad();
    MicroBatchInfo info;
    if (weight_at_forward) info.loss_weight = weight;
    ActivationContext ctx(info);
    const double loss = summed_loss(model.forward_losses(tokens, targets, ctx));
    model.backward(weight, ctx);
    EXPECT_TRUE(ctx.empty());
    std::vector<std::vector<float>> grads;
    for (Parameter* p : model.parameters()) grads.push_back(p->grad.to_vector());
    return std::make_pair(loss, grads);
  };
  const auto [loss_fused, grads_fused] = run(true);
  const auto [loss, grads] = run(false);
  EXPECT_NEAR(loss_fused, loss, 1e-6 * std::abs(loss));
  ASSERT_EQ(grads_fused.size(), grads.size());
  for (std::size_t i = 0; i < grads.size(); ++i)
    test::expect_close("gradient " + std::to_string(i), grads_fused[i], grads[i], 1e-6, 1e-4);

  GptModel model(tiny_config());
  model.initialize(3);
  MicroBatchInfo info;
  info.loss_weight = weight;
  ActivationContext ctx(info);
  model.forward(tokens, targets, ctx);
  EXPECT_THROW(model.backward(2.0f * weight, ctx), InternalError);
}

TEST(GptModel, PaddedVocabularyRowsGetNoGradient) {
  GptModel model(tiny_config());
  model.initialize(3);
  model.zero_grad();
  ActivationContext ctx(MicroBatchInfo{});
  model.forward(random_tokens(2, 7, 29, 1), random_tokens(2, 7, 29, 2), ctx);
  model.backward(1.0f, ctx);
  Parameter* wte = model.parameters()[0];
  ASSERT_EQ(wte->name, "wte");
  for (float g : wte->grad.slice(0, 29, 3).to_vector()) EXPECT_EQ(g, 0.0f);
}

// Two micro-batches of 2 accumulate exactly the gradient of one batch of 4 (up to float
// summation order), with dropout on: masks are keyed by the sample's index in the global
// batch, not by the micro-batch it happens to be in.
TEST(GptModel, MicroBatchesAccumulateTheFullBatchGradient) {
  ModelConfig config = tiny_config();
  config.dropout = 0.2;
  const Tensor tokens = random_tokens(4, 7, 29, 1), targets = random_tokens(4, 7, 29, 2);

  auto gradients = [&](std::int64_t micro) {
    GptModel model(config);
    model.initialize(3);
    model.zero_grad();
    double loss = 0.0;
    for (std::int64_t first = 0; first < 4; first += micro) {
      MicroBatchInfo info;
      info.step = 3;
      info.seed = 5;
      info.sample_offset = first;
      info.micro_batch = first / micro;
      ActivationContext ctx(info);
      loss += model.forward(tokens.slice(0, first, micro), targets.slice(0, first, micro), ctx);
      model.backward(1.0f / 28.0f, ctx);
    }
    std::vector<std::vector<float>> grads;
    for (Parameter* p : model.parameters()) grads.push_back(p->grad.to_vector());
    return std::make_pair(loss, grads);
  };
  auto [loss_full, grads_full] = gradients(4);
  auto [loss_split, grads_split] = gradients(2);
  EXPECT_NEAR(loss_full, loss_split, 1e-4 * std::abs(loss_full));
  for (std::size_t i = 0; i < grads_full.size(); ++i)
    for (std::size_t j = 0; j < grads_full[i].size(); ++j)
      ASSERT_NEAR(grads_full[i][j], grads_split[i][j], 1e-5 + 1e-4 * std::abs(grads_full[i][j]))
          << "parameter " << i << " element " << j;
}

TEST(GptModel, DropoutDependsOnStepAndIsOffOutsideTraining) {
  ModelConfig config = tiny_config();
  config.dropout = 0.3;
  GptModel model(config);
  model.initialize(3);
  const Tensor tokens = random_tokens(2, 7, 29, 1), targets = random_tokens(2, 7, 29, 2);
  const double eval_a = loss_of(model, tokens, targets, false, 1);
  const double eval_b = loss_of(model, tokens, targets, false, 2);
  EXPECT_EQ(eval_a, eval_b);
  const double train_1 = loss_of(model, tokens, targets, true, 1);
  EXPECT_EQ(train_1, loss_of(model, tokens, targets, true, 1));  // repeatable
  EXPECT_NE(train_1, loss_of(model, tokens, targets, true, 2));  // a new mask each step
  EXPECT_NE(train_1, eval_a);
}

TEST(GptModel, ParameterNamesAreUniqueAndTheCountMatchesTheFormula) {
  ModelConfig c = tiny_config();
  GptModel model(c);
  std::set<std::string> names;
  for (Parameter* p : model.parameters()) EXPECT_TRUE(names.insert(p->name).second) << p->name;
  EXPECT_TRUE(names.count("h.1.attn.qkv.weight"));
  EXPECT_TRUE(names.count("ln_f.bias"));
  const std::int64_t d = c.d_model, ff = c.ff_width();
  const std::int64_t per_layer =
      2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d);
  const std::int64_t expected =
      c.padded_vocab_size() * d + c.seq_len * d + c.n_layer * per_layer + 2 * d;
  EXPECT_EQ(count_elements(model.parameters()), expected);
}

TEST(GptModel, LogitsMatchTheLossPath) {
  GptModel model(tiny_config());
  model.initialize(3);
  const Tensor tokens = random_tokens(1, 7, 29, 1), targets = random_tokens(1, 7, 29, 2);
  ActivationContext ctx(MicroBatchInfo{});
  Tensor logits = model.logits(tokens, ctx);
  ASSERT_EQ(logits.shape(), (Shape{1, 7, 32}));
  double expected = 0.0;
  for (std::int64_t t = 0; t < 7; ++t) {
    const float* row = logits.data<float>() + t * 32;
    double max = row[0], sum = 0.0;
    for (int v = 0; v < 29; ++v) max = std::max<double>(max, row[v]);
    for (int v = 0; v < 29; ++v) sum += std::exp(row[v] - max);
    expected += std::log(sum) + max - row[targets.data<std::int32_t>()[t]];
  }
  EXPECT_NEAR(loss_of(model, tokens, targets, false), expected, 1e-4);
}

}  // namespace
}  // namespace ternion
