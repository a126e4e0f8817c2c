// generate_text_cached against generate_text on the model's own logits: the same text, for a
// generation that stays inside seq_len, one that runs past it, a prompt longer than it, and a
// Llama's longer context.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "training/trainer.h"

namespace ternion {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.vocab_pad_multiple = 32;
  c.seq_len = 12;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.init_std = 0.2;
  return c;
}

std::string windowed(GptModel& model, const SampleOptions& options) {
  return generate_text(model.config(), options, 1, [&](const Tensor& tokens) {
    MicroBatchInfo info;
    info.training = false;
    ActivationContext ctx(info);
    return model.logits(tokens, ctx);
  });
}

SampleOptions options_with(std::string prompt, std::int64_t max_tokens, std::int64_t top_k,
                           std::uint64_t seed) {
  SampleOptions o;
  o.prompt = std::move(prompt);  // bytes below the vocabulary size of 29
  o.max_tokens = max_tokens;
  o.temperature = 1.0;
  o.top_k = top_k;
  o.seed = seed;
  return o;
}

void expect_same_text(GptModel& model, const SampleOptions& options, const std::string& label) {
  const std::string want = windowed(model, options);
  const std::string got = generate_text_cached(model.config(), model, options);
  EXPECT_EQ(got, want) << label;
  EXPECT_EQ(got.size(), static_cast<std::size_t>(options.max_tokens)) << label;
  // A sample of one repeated byte would hide a decoder that ignores its context.
  EXPECT_GT(std::set<char>(got.begin(), got.end()).size(), 2u) << label;
}

class GenerateCached : public ::testing::Test {
 protected:
  GenerateCached() : model_(tiny_config()) { model_.initialize(11); }
  GptModel model_;
};

TEST_F(GenerateCached, MatchesTheWindowedPathInsideTheContext) {
  // 3 prompt tokens + 8 generated: the last draw sees 11 of the 12 positions.
  expect_same_text(model_, options_with("\x03\x07\x01", 9, 0, 1), "inside seq_len, all tokens");
  expect_same_text(model_, options_with("\x05\x0a", 10, 5, 2), "inside seq_len, top-5");
  SampleOptions nucleus = options_with("\x05\x0a", 10, 0, 6);
  nucleus.top_p = 0.9;
  expect_same_text(model_, nucleus, "inside seq_len, top-p 0.9");
}

TEST_F(GenerateCached, MatchesTheWindowedPathPastTheContext) {
  // 3 + 37 tokens: the window slides for the last 28 draws.
  expect_same_text(model_, options_with("\x03\x07\x01", 37, 0, 3), "past seq_len, all tokens");
  expect_same_text(model_, options_with("\x02", 30, 8, 4), "past seq_len, top-8");
}

TEST_F(GenerateCached, MatchesTheWindowedPathForAPromptLongerThanTheContext) {
  const std::string prompt = "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0b\x0c\x0d\x0e\x0f\x10\x11";
  expect_same_text(model_, options_with(prompt, 6, 0, 5), "prompt of 16 tokens");
}

// A Llama made for a longer context than it trains at (model.max_context): windows of up to
// max_context tokens, inside it and sliding past it.
TEST(GenerateCachedLlama, AContextPastSeqLenMatchesTheWindowedPath) {
  ModelConfig c = tiny_config();
  c.family = "llama";
  c.n_kv_head = 1;
  c.max_context = 20;
  GptModel model(c);
  model.initialize(13);
  SampleOptions wide = options_with("\x03\x07\x01", 9, 0, 7);
  wide.context = 20;
  expect_same_text(model, wide, "context 20, inside it");
  wide.max_tokens = 37;
  expect_same_text(model, wide, "context 20, past it");
  // The window is the option's: 12 tokens (seq_len, the default) sample other text.
  SampleOptions narrow = wide;
  narrow.context = 0;
  EXPECT_NE(windowed(model, wide), windowed(model, narrow));
  narrow.context = 12;
  EXPECT_EQ(generate_text_cached(c, model, narrow), windowed(model, narrow));
  wide.context = 21;  // past what the model is made for
  EXPECT_THROW(generate_text_cached(c, model, wide), InternalError);
  EXPECT_THROW(windowed(model, wide), InternalError);
}

TEST_F(GenerateCached, NoTokensGivesEmptyText) {
  EXPECT_EQ(generate_text_cached(model_.config(), model_, options_with("\x01", 0, 0, 6)), "");
}

// The stop token ends the text before it on both paths; a stop token never drawn changes
// nothing.
TEST_F(GenerateCached, AStopTokenEndsTheTextBeforeIt) {
  const SampleOptions free_running = options_with("\x03\x07\x01", 30, 0, 7);
  const std::string full = windowed(model_, free_running);
  ASSERT_EQ(full.size(), 30u);
  const std::size_t at = 6;
  const auto stop = static_cast<std::int32_t>(static_cast<unsigned char>(full[at]));
  const std::size_t first = full.find(full[at]);
  SampleOptions stopping = free_running;
  stopping.stop_token = stop;
  EXPECT_EQ(windowed(model_, stopping), full.substr(0, first));
  EXPECT_EQ(generate_text_cached(model_.config(), model_, stopping), full.substr(0, first));
  for (std::int32_t absent = 0; absent < 29; ++absent)
    if (full.find(static_cast<char>(absent)) == std::string::npos) {
      stopping.stop_token = absent;
      EXPECT_EQ(generate_text_cached(model_.config(), model_, stopping), full);
      break;
    }
}

// Equal logits are ordered by id, so a draw among tied tokens names the same token on every
// machine: it samples as logits that fall with the id by a hair too small to move a draw.
TEST(GenerateSampling, TiedLogitsAreOrderedById) {
  ModelConfig c = tiny_config();
  auto constant_logits = [&](float step) {
    return [&c, step](const Tensor& tokens) {
      Tensor logits = Tensor::zeros({1, tokens.size(1), c.padded_vocab_size()});
      float* row = logits.data<float>();
      for (std::int64_t t = 0; t < tokens.size(1); ++t)
        for (std::int64_t v = 0; v < c.padded_vocab_size(); ++v)
          row[t * c.padded_vocab_size() + v] = 1.0f - step * static_cast<float>(v);
      return logits;
    };
  };
  for (const std::int64_t top_k : {0, 12}) {
    SampleOptions o = options_with("\x01", 60, top_k, 9);
    const std::string tied = generate_text(c, o, 1, constant_logits(0.0f));
    EXPECT_EQ(tied, generate_text(c, o, 1, constant_logits(1e-7f))) << "top-k " << top_k;
    EXPECT_GT(std::set<char>(tied.begin(), tied.end()).size(), 5u);
  }
}

}  // namespace
}  // namespace ternion
