// The sampling step on fixed logits: top-k and top-p keep the tokens transformers' TopK and
// TopP warpers keep, and the kept tokens are drawn in proportion to their probabilities.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <string>

#include "training/generation.h"

namespace ternion {
namespace {

// Tokens 'a'..'d' with probabilities 0.5, 0.3, 0.15 and 0.05; every other byte impossible.
constexpr std::array<double, 4> kProbabilities = {0.5, 0.3, 0.15, 0.05};

std::map<char, int> letter_counts(std::int64_t top_k, double top_p, std::int64_t draws) {
  ModelConfig mc;
  mc.vocab_size = 256;
  mc.seq_len = 8;
  SampleOptions options;
  options.prompt.assign(1, 'a');
  options.max_tokens = draws;
  options.temperature = 1.0;
  options.top_k = top_k;
  options.top_p = top_p;
  options.seed = 5;
  const std::string text = generate_text(mc, options, 1, [&](const Tensor& tokens) {
    Tensor logits = Tensor::full({1, tokens.size(1), mc.padded_vocab_size()}, -1e30f);
    for (std::int64_t t = 0; t < tokens.size(1); ++t)
      for (std::size_t j = 0; j < kProbabilities.size(); ++j)
        logits.data<float>()[t * mc.padded_vocab_size() + 'a' + static_cast<std::int64_t>(j)] =
            static_cast<float>(std::log(kProbabilities[j]));
    return logits;
  });
  std::map<char, int> counts;
  for (const char c : text) ++counts[c];
  return counts;
}

// Each kept letter's share of `draws` is within 5 standard deviations of its renormalised
// probability (the draws are seeded: the test is deterministic).
void expect_shares(const std::map<char, int>& counts, std::size_t kept, std::int64_t draws) {
  double mass = 0;
  for (std::size_t j = 0; j < kept; ++j) mass += kProbabilities[j];
  for (std::size_t j = 0; j < kept; ++j) {
    const double p = kProbabilities[j] / mass;
    const double expected = p * static_cast<double>(draws);
    const double sd = std::sqrt(expected * (1 - p));
    const auto it = counts.find(static_cast<char>('a' + j));
    const double got = it == counts.end() ? 0 : it->second;
    EXPECT_NEAR(got, expected, 5 * sd + 1) << "letter " << static_cast<char>('a' + j);
  }
}

std::string letters(const std::map<char, int>& counts) {
  std::string out;
  for (const auto& [c, n] : counts) out += c;
  return out;
}

TEST(Sampling, TopPKeepsTheFewestLikeliestTokensThatReachP) {
  // transformers' TopPLogitsWarper removes a token when the probability of it and the less
  // likely ones is at most 1 - p: at p = 0.5 only 'a'; just past 0.5, 'a' and 'b'; past 0.8,
  // 'c' too; at 1, all four.
  EXPECT_EQ(letters(letter_counts(0, 0.4, 400)), "a");
  EXPECT_EQ(letters(letter_counts(0, 0.5, 400)), "a");
  EXPECT_EQ(letters(letter_counts(0, 0.51, 400)), "ab");
  EXPECT_EQ(letters(letter_counts(0, 0.79, 400)), "ab");
  EXPECT_EQ(letters(letter_counts(0, 0.81, 400)), "abc");
  EXPECT_EQ(letters(letter_counts(0, 1.0, 4000)), "abcd");
  expect_shares(letter_counts(0, 0.81, 4000), 3, 4000);
  expect_shares(letter_counts(0, 1.0, 4000), 4, 4000);
}

TEST(Sampling, TopPAppliesAfterTopK) {
  // Top-k 2 renormalises 'a' and 'b' to 0.625 and 0.375: p = 0.6 keeps only 'a', 0.7 both.
  EXPECT_EQ(letters(letter_counts(2, 1.0, 400)), "ab");
  EXPECT_EQ(letters(letter_counts(2, 0.6, 400)), "a");
  EXPECT_EQ(letters(letter_counts(2, 0.7, 400)), "ab");
  expect_shares(letter_counts(2, 0.7, 4000), 2, 4000);
}

}  // namespace
}  // namespace ternion
