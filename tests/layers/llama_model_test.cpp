// The Llama family's layers composed: analytic gradients against finite differences of the
// model's own loss (grouped-query, plain multi-head and tied variants), the parameter names
// the Hugging Face mapping and checkpoints rely on, and the dry run's count against the built
// model's. (Each kernel's backward is checked in double precision in tests/kernels; here the
// question is the wiring, so float and directional derivatives suffice.)
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "framework/philox.h"
#include "layers/gpt_model.h"
#include "layers/kv_cache_decoder.h"
#include "layers/model_facts.h"
#include "parallel/rank_layout.h"

namespace ternion {
namespace {

ModelConfig llama_config(std::int64_t kv_heads, bool tied) {
  ModelConfig c;
  c.family = "llama";
  c.vocab_size = 29;
  c.vocab_pad_multiple = 8;  // 32 rows, 3 of them padding
  c.seq_len = 7;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = kv_heads;
  c.d_model = 16;
  c.d_ff = 20;
  c.rope_theta = 100.0;  // a small base, so positions 0..6 turn every pair visibly
  c.tie_embeddings = tied;
  c.init_std = 0.2;      // larger than usual, so every path carries a visible gradient
  return c;
}

Tensor random_tokens(std::int64_t batch, std::int64_t seq, std::int64_t vocab, std::uint64_t seed) {
  Tensor t = Tensor::empty({batch, seq}, DType::I32);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<std::int32_t>()[i] = static_cast<std::int32_t>(
        philox_bits({seed, 99}, static_cast<std::uint64_t>(i)).v[0] % vocab);
  return t;
}

void expect_gradients_match_finite_differences(const ModelConfig& config) {
  GptModel model(config);
  model.initialize(3);
  const Tensor tokens = random_tokens(2, 7, 29, 1), targets = random_tokens(2, 7, 29, 2);
  const float weight = 1.0f / 14.0f;
  model.zero_grad();
  {
    ActivationContext ctx(MicroBatchInfo{});
    model.forward(tokens, targets, ctx);
    model.backward(weight, ctx);
    EXPECT_TRUE(ctx.empty());
  }
  auto loss = [&] {
    MicroBatchInfo info;
    info.training = false;
    ActivationContext ctx(info);
    return model.forward(tokens, targets, ctx) * weight;
  };
  // Per parameter, the derivative along a random direction d of it alone.
  for (Parameter* p : model.parameters()) {
    const std::vector<float> original = p->value.to_vector(), grad = p->grad.to_vector();
    std::vector<float> direction(original.size());
    double analytic = 0.0;
    for (std::size_t i = 0; i < original.size(); ++i) {
      direction[i] = philox_normal({11, hash_name(p->name)}, i);
      analytic += double(grad[i]) * direction[i];
    }
    const float eps = 2e-3f;
    auto loss_at = [&](float sign) {
      std::vector<float> moved(original);
      for (std::size_t i = 0; i < moved.size(); ++i) moved[i] += sign * eps * direction[i];
      p->value.copy_from(Tensor::from_vector(moved, p->value.shape()));
      return loss();
    };
    const double numeric = (loss_at(1) - loss_at(-1)) / (2.0 * eps);
    p->value.copy_from(Tensor::from_vector(original, p->value.shape()));
    const double scale = std::max(std::abs(numeric), 1e-3);
    EXPECT_LT(std::abs(analytic - numeric) / scale, 1e-2)
        << p->name << ": analytic " << analytic << " numeric " << numeric;
  }
}

TEST(LlamaModel, GroupedQueryGradientsMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(llama_config(2, false));
}

TEST(LlamaModel, MultiHeadTiedGradientsMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(llama_config(4, true));
}

TEST(LlamaModel, OneKeyValueHeadGradientsMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(llama_config(1, false));
}

TEST(LlamaModel, ParameterNamesAndShapes) {
  const ModelConfig c = llama_config(2, false);
  GptModel model(c);
  std::vector<std::pair<std::string, Shape>> got;
  for (const Parameter* p : model.parameters()) got.emplace_back(p->name, p->value.shape());
  // (H + 2G) hs = (4 + 4) * 4 rows of QKV; 2 d_ff rows of gate_up; no biases, no wpe.
  const std::vector<std::pair<std::string, Shape>> want = {
      {"wte", {32, 16}},
      {"h.0.attn_norm.weight", {16}},       {"h.0.attn.qkv.weight", {32, 16}},
      {"h.0.attn.proj.weight", {16, 16}},   {"h.0.mlp_norm.weight", {16}},
      {"h.0.mlp.gate_up.weight", {40, 16}}, {"h.0.mlp.down.weight", {16, 20}},
      {"h.1.attn_norm.weight", {16}},       {"h.1.attn.qkv.weight", {32, 16}},
      {"h.1.attn.proj.weight", {16, 16}},   {"h.1.mlp_norm.weight", {16}},
      {"h.1.mlp.gate_up.weight", {40, 16}}, {"h.1.mlp.down.weight", {16, 20}},
      {"lm_head.weight", {32, 16}},         {"norm.weight", {16}},
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(model.tied_embedding(), nullptr);
  for (const Parameter* p : model.parameters())
    EXPECT_EQ(p->weight_decay, p->value.dim() == 2) << p->name;  // norms are not decayed
}

TEST(LlamaModel, TiedHeadUsesTheEmbedding) {
  GptModel model(llama_config(2, true));
  ASSERT_NE(model.tied_embedding(), nullptr);
  EXPECT_EQ(model.tied_embedding()->name, "wte");
  for (const Parameter* p : model.parameters()) EXPECT_NE(p->name, "lm_head.weight");
}

TEST(LlamaModel, DryRunCountsWhatIsBuilt) {
  for (const bool tied : {false, true}) {
    const ModelConfig c = llama_config(2, tied);
    const std::int64_t built = count_elements(GptModel(c).parameters());
    EXPECT_EQ(parameters_on_rank(c, make_rank_layout(1, 1, 1, 1), 0), built) << tied;
    // Two pipeline stages: what each chunk builds.
    const RankLayout layout = make_rank_layout(2, 1, 2, 1);
    const std::int64_t first = count_elements(GptModel(c, {}, {0, 1, true, false}).parameters());
    const std::int64_t last = count_elements(GptModel(c, {}, {1, 2, false, true}).parameters());
    EXPECT_EQ(parameters_on_rank(c, layout, layout.global_rank({0, 0, 0}), 1), first) << tied;
    EXPECT_EQ(parameters_on_rank(c, layout, layout.global_rank({0, 0, 1}), 1), last) << tied;
  }
}

// Decoding with a KV cache (the key/value heads only, rotated at their own positions) gives
// each appended token the last row of the model's logits on its whole prefix.
TEST(LlamaModel, KvCacheDecodingMatchesTheWholePrefix) {
  GptModel model(llama_config(2, false));
  model.initialize(3);
  KvCacheDecoder decoder(model);
  const Tensor tokens = random_tokens(1, 7, 29, 5);
  const std::int32_t* ids = tokens.data<std::int32_t>();
  decoder.prime(std::span<const std::int32_t>(ids, 3));
  for (std::int64_t t = 3; t < 7; ++t) {
    const std::vector<float> got = decoder.append(ids[t]).to_vector();
    MicroBatchInfo info;
    info.training = false;
    ActivationContext ctx(info);
    const Tensor logits = model.logits(tokens.slice(1, 0, t + 1).contiguous(), ctx);
    const std::vector<float> want = logits.select(1, t).contiguous().to_vector();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5) << "position " << t << " logit " << i;
  }
  EXPECT_EQ(decoder.positions(), 7);
}

}  // namespace
}  // namespace ternion
