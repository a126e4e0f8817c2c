// The KV-cache decoder against the model it reads: at every position, the logits of one
// appended token equal the last row of GptModel::logits on the whole prefix; reset() and
// prime() start over; the cache refuses a position past seq_len.
#include "layers/kv_cache_decoder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "layers/layer_registry.h"
#include "layers/transformer_block.h"
#include "test_util.h"

namespace ternion {
namespace {

constexpr double kTolerance = 1e-5;

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.vocab_pad_multiple = 32;  // 32 rows, 3 of them padding
  c.seq_len = 12;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.init_std = 0.2;
  return c;
}

// Initialised, then every bias and LayerNorm parameter (zeros and ones at initialisation)
// moved off its initial value, so that a bias or norm read wrongly changes the logits.
std::unique_ptr<GptModel> tiny_model() {
  auto model = std::make_unique<GptModel>(tiny_config());
  model->initialize(7);
  std::uint64_t seed = 100;
  for (Parameter* p : model->parameters()) {
    if (p->init == ParameterInit::Normal) continue;
    const std::vector<float> noise =
        test::random_floats(static_cast<std::size_t>(p->value.numel()), ++seed, -0.2f, 0.2f);
    float* values = p->value.data<float>();
    for (std::size_t i = 0; i < noise.size(); ++i) values[i] += noise[i];
  }
  return model;
}

// The last row of the model's logits on `tokens`, the windowed path's reference.
std::vector<float> model_last_logits(GptModel& model, const std::vector<std::int32_t>& tokens) {
  MicroBatchInfo info;
  info.training = false;
  ActivationContext ctx(info);
  const auto n = static_cast<std::int64_t>(tokens.size());
  const Tensor logits = model.logits(test::i32_tensor(tokens, {1, n}), ctx);
  return logits.select(1, n - 1).contiguous().to_vector();
}

std::vector<std::int32_t> random_tokens(std::size_t n, std::uint64_t seed) {
  return test::random_ints(n, seed, 0, 29);
}

// Appends tokens[from..] one at a time, each compared with the model on its prefix.
void expect_appends_match_model(GptModel& model, KvCacheDecoder& decoder,
                                const std::vector<std::int32_t>& tokens, std::size_t from,
                                const std::string& label) {
  for (std::size_t t = from; t < tokens.size(); ++t) {
    const std::vector<std::int32_t> prefix(tokens.begin(), tokens.begin() + t + 1);
    const std::vector<float> got = decoder.append(tokens[t]).to_vector();
    test::expect_close(label + ": position " + std::to_string(t), got,
                       model_last_logits(model, prefix), kTolerance, 0.0);
  }
}

TEST(KvCacheDecoder, AppendedTokensGiveTheModelsLogitsOfTheirPrefix) {
  auto model = tiny_model();
  KvCacheDecoder decoder(*model);
  EXPECT_EQ(decoder.capacity(), 12);
  const std::vector<std::int32_t> tokens = random_tokens(12, 1);
  expect_appends_match_model(*model, decoder, tokens, 0, "append");
  EXPECT_EQ(decoder.positions(), 12);
  EXPECT_TRUE(decoder.full());
}

TEST(KvCacheDecoder, ResetStartsOverAtPositionZero) {
  auto model = tiny_model();
  KvCacheDecoder decoder(*model);
  for (std::int32_t token : random_tokens(9, 2)) decoder.append(token);
  decoder.reset();
  EXPECT_EQ(decoder.positions(), 0);
  // Other tokens than before: what the cache held must not leak into the new sequence.
  expect_appends_match_model(*model, decoder, random_tokens(12, 3), 0, "after reset");
}

TEST(KvCacheDecoder, PrimeRunsAPrefixInOnePassThenAppends) {
  auto model = tiny_model();
  KvCacheDecoder decoder(*model);
  for (std::int32_t token : random_tokens(4, 4)) decoder.append(token);  // primed over
  const std::vector<std::int32_t> tokens = random_tokens(12, 5);
  const std::vector<std::int32_t> prefix(tokens.begin(), tokens.begin() + 5);
  test::expect_close("prime", decoder.prime(prefix).to_vector(), model_last_logits(*model, prefix),
                     kTolerance, 0.0);
  EXPECT_EQ(decoder.positions(), 5);
  expect_appends_match_model(*model, decoder, tokens, 5, "append after prime");
}

TEST(KvCacheDecoder, RefusesAPositionPastSeqLenAndReprimesWithTheWindow) {
  auto model = tiny_model();
  KvCacheDecoder decoder(*model);
  const std::vector<std::int32_t> tokens = random_tokens(14, 6);
  for (std::size_t t = 0; t < 12; ++t) decoder.append(tokens[t]);
  try {
    decoder.append(tokens[12]);
    FAIL() << "append past seq_len was accepted";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("the KV cache is full (12 positions"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(decoder.positions(), 12);  // the refused token left the cache as it was
  EXPECT_THROW(decoder.prime(tokens), InternalError);  // 14 tokens do not fit
  EXPECT_THROW(decoder.prime(std::vector<std::int32_t>{}), InternalError);

  // The windowed path's next step: the last 12 tokens renumbered from position 0.
  const std::vector<std::int32_t> window(tokens.begin() + 1, tokens.begin() + 13);
  test::expect_close("re-primed window", decoder.prime(window).to_vector(),
                     model_last_logits(*model, window), kTolerance, 0.0);
  EXPECT_TRUE(decoder.full());
}

// A Llama made for more positions than seq_len holds them all, each appended token's logits
// the model's on its whole prefix; a cache past what it is made for is refused.
TEST(KvCacheDecoder, HoldsALlamasLongerContext) {
  ModelConfig c = tiny_config();
  c.family = "llama";
  c.n_kv_head = 1;
  c.max_context = 20;
  GptModel model(c);
  model.initialize(9);
  KvCacheDecoder decoder(model, 20);
  EXPECT_EQ(decoder.capacity(), 20);
  expect_appends_match_model(model, decoder, random_tokens(20, 8), 0, "llama, 20 positions");
  EXPECT_TRUE(decoder.full());
  EXPECT_THROW(KvCacheDecoder(model, 21), InternalError);
  EXPECT_EQ(KvCacheDecoder(model).capacity(), 12);  // seq_len by default
}

TEST(KvCacheDecoder, SeesTheModelsCurrentWeights) {
  auto model = tiny_model();
  KvCacheDecoder decoder(*model);
  const std::vector<std::int32_t> tokens = random_tokens(3, 7);
  const std::vector<float> before = decoder.prime(tokens).to_vector();
  for (Parameter* p : model->parameters())
    if (p->name == "h.1.mlp.fc.bias") p->value.fill(0.5f);
  const std::vector<float> after = decoder.prime(tokens).to_vector();
  EXPECT_FALSE(test::close_to("changed weights", after, before, kTolerance, 0.0));
  test::expect_close("changed weights", after, model_last_logits(*model, tokens), kTolerance, 0.0);
}

TEST(KvCacheDecoder, RejectsAPipelineChunkAndOutOfRangeTokens) {
  const GptModel first_stage(tiny_config(), {}, ModelChunk{0, 1, true, false});
  EXPECT_THROW(KvCacheDecoder{first_stage}, InternalError);
  auto model = tiny_model();
  KvCacheDecoder decoder(*model);
  EXPECT_THROW(decoder.append(32), InternalError);
  EXPECT_THROW(decoder.append(-1), InternalError);
  EXPECT_EQ(decoder.positions(), 0);
}

// A user's block may have no cached mode: the decoder declines it (ternion-generate then
// samples through the windowed model).
TEST(KvCacheDecoder, DeclinesAUserBlock) {
  EXPECT_TRUE(KvCacheDecoder::supports(tiny_config()));
  LayerRegistry::instance().add("transformer_for_the_cache_test", [](const BlockSpec& spec) {
    return std::make_unique<TransformerBlock>(spec.name, spec.config, spec.tp);
  });
  ModelConfig user = tiny_config();
  user.block = "transformer_for_the_cache_test";
  EXPECT_FALSE(KvCacheDecoder::supports(user));
}

}  // namespace
}  // namespace ternion
