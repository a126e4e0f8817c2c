// Token and position embeddings: forward against a lookup loop, backward (accumulating)
// against finite differences, vocabulary sharding (two shards reproduce the unsharded
// forward and backward exactly), the f32 ops against the f64 templates.
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/embedding.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kB = 3, kT = 7, kC = 10, kV = 37, kTMax = 9;
constexpr int kTokens = kB * kT;

// Random tokens, with repeats forced so that the backward has rows to sum.
std::vector<std::int32_t> random_tokens(std::uint64_t seed) {
  auto tokens = test::random_ints(kTokens, seed, 0, kV);
  tokens[5] = tokens[0];
  tokens[11] = tokens[0];
  tokens[20] = tokens[3];
  return tokens;
}

TEST(TokenEmbedding, ForwardLooksUpRows) {
  const auto tokens = random_tokens(1);
  const auto wte = test::random_floats(kV * kC, 2);
  Tensor out = Tensor::full({kB, kT, kC}, NAN);
  token_embedding_forward(out, test::i32_tensor(tokens, {kB, kT}),
                          Tensor::from_vector(wte, {kV, kC}));
  std::vector<float> want;
  for (int n = 0; n < kTokens; ++n)
    for (int c = 0; c < kC; ++c) want.push_back(wte[tokens[n] * kC + c]);
  test::expect_bitwise_equal("token embedding forward", out.to_vector(), want);
}

TEST(TokenEmbedding, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const auto tokens = random_tokens(3);
  auto wte = test::convert<double>(test::random_floats(kV * kC, 4));
  const auto r = test::convert<double>(test::random_floats(kTokens * kC, 5));
  std::vector<double> out(kTokens * kC);
  auto forward = [&] {
    cpu::token_embedding_forward<double>(out.data(), tokens.data(), wte.data(), kTokens, kV, kC, 0);
    return test::dot(out, r);
  };
  auto want = test::finite_difference_gradient(wte, forward);
  for (double& g : want) g += 0.125;
  std::vector<double> dwte(kV * kC, 0.125);
  cpu::token_embedding_backward<double>(dwte.data(), r.data(), tokens.data(), kTokens, kV, kC, 0);
  test::expect_close("token embedding dwte vs finite differences", dwte, want, 1e-8, 1e-7);
}

TEST(TokenEmbedding, VocabShardsReproduceTheUnshardedTable) {
  const auto tokens = random_tokens(6);
  const auto wte = test::random_floats(kV * kC, 7);
  const auto dout = test::random_floats(kTokens * kC, 8);
  Tensor tokens_t = test::i32_tensor(tokens, {kB, kT});
  Tensor wte_t = Tensor::from_vector(wte, {kV, kC}),
         dout_t = Tensor::from_vector(dout, {kB, kT, kC});

  Tensor full_out = Tensor::empty({kB, kT, kC}), full_dwte = Tensor::zeros({kV, kC});
  token_embedding_forward(full_out, tokens_t, wte_t);
  token_embedding_backward(full_dwte, dout_t, tokens_t);

  constexpr int kSplit = 20;  // shard 0 holds rows [0, 20), shard 1 rows [20, 37)
  std::vector<float> summed(kTokens * kC, 0.0f);
  for (auto [start, rows] : {std::pair{0, kSplit}, std::pair{kSplit, kV - kSplit}}) {
    Tensor shard = wte_t.slice(0, start, rows).contiguous();
    Tensor out = Tensor::full({kB, kT, kC}, NAN), dwte = Tensor::zeros({rows, kC});
    token_embedding_forward(out, tokens_t, shard, start);
    token_embedding_backward(dwte, dout_t, tokens_t, start);
    const auto o = out.to_vector();
    for (std::size_t i = 0; i < o.size(); ++i) summed[i] += o[i];
    test::expect_bitwise_equal("dwte of shard at " + std::to_string(start), dwte.to_vector(),
                               full_dwte.slice(0, start, rows).to_vector());
  }
  test::expect_bitwise_equal("sum of the shards' outputs", summed, full_out.to_vector());
}

TEST(PositionEmbedding, ForwardAddsAndBackwardMatchesFiniteDifferences) {
  const auto base = test::convert<double>(test::random_floats(kTokens * kC, 9));
  auto wpe = test::convert<double>(test::random_floats(kTMax * kC, 10));
  const auto r = test::convert<double>(test::random_floats(kTokens * kC, 11));
  auto forward_out = [&] {
    std::vector<double> out = base;
    cpu::position_embedding_forward<double>(out.data(), wpe.data(), kB, kT, kC);
    return out;
  };
  std::vector<double> want_out = base;
  for (int b = 0; b < kB; ++b)
    for (int t = 0; t < kT; ++t)
      for (int c = 0; c < kC; ++c) want_out[(b * kT + t) * kC + c] += wpe[t * kC + c];
  test::expect_close("position embedding forward", forward_out(), want_out, 0, 0);

  auto want = test::finite_difference_gradient(wpe, [&] { return test::dot(forward_out(), r); });
  for (double& g : want) g -= 1.0;
  std::vector<double> dwpe(kTMax * kC, -1.0);  // rows t >= T keep their value
  cpu::position_embedding_backward<double>(dwpe.data(), r.data(), kB, kT, kC);
  test::expect_close("position embedding dwpe vs finite differences", dwpe, want, 1e-8, 1e-7);
}

TEST(Embedding, FloatOpsMatchDoubleTemplates) {
  const auto tokens = random_tokens(12);
  const auto wtef = test::random_floats(kV * kC, 13), wpef = test::random_floats(kTMax * kC, 14);
  const auto doutf = test::random_floats(kTokens * kC, 15);
  const auto wte = test::convert<double>(wtef), wpe = test::convert<double>(wpef),
             dout = test::convert<double>(doutf);
  constexpr int kStart = 4;  // a shard of rows [4, 37): tokens below it are skipped
  std::vector<double> out(kTokens * kC), dwte((kV - kStart) * kC, 0.0), dwpe(kTMax * kC, 0.0);
  cpu::token_embedding_forward<double>(out.data(), tokens.data(), wte.data() + kStart * kC, kTokens,
                                       kV - kStart, kC, kStart);
  cpu::position_embedding_forward<double>(out.data(), wpe.data(), kB, kT, kC);
  cpu::token_embedding_backward<double>(dwte.data(), dout.data(), tokens.data(), kTokens,
                                        kV - kStart, kC, kStart);
  cpu::position_embedding_backward<double>(dwpe.data(), dout.data(), kB, kT, kC);

  Tensor tokens_t = test::i32_tensor(tokens, {kB, kT});
  Tensor wte_t = Tensor::from_vector(wtef, {kV, kC}).slice(0, kStart, kV - kStart);
  Tensor wpe_t = Tensor::from_vector(wpef, {kTMax, kC}),
         dout_t = Tensor::from_vector(doutf, {kB, kT, kC});
  Tensor out_t = Tensor::empty({kB, kT, kC});
  token_embedding_forward(out_t, tokens_t, wte_t, kStart);
  position_embedding_forward(out_t, wpe_t);
  Tensor dwte_t = Tensor::zeros({kV - kStart, kC}), dwpe_t = Tensor::zeros({kTMax, kC});
  token_embedding_backward(dwte_t, dout_t, tokens_t, kStart);
  position_embedding_backward(dwpe_t, dout_t);
  test::expect_close("embedding f32 out", out_t.to_vector(), out, 1e-6, 1e-6);
  test::expect_close("embedding f32 dwte", dwte_t.to_vector(), dwte, 1e-6, 1e-6);
  test::expect_close("embedding f32 dwpe", dwpe_t.to_vector(), dwpe, 1e-6, 1e-6);
}

}  // namespace
}  // namespace ternion
