// Cross-entropy: losses and lse against a naive log-softmax, dlogits against finite
// differences (padded columns and ignored rows get zero), padded logits have no effect,
// in-place backward, the fused forward_backward against forward then backward, rows of several
// chunks whose max rises, jumps and falls, targets outside the vocabulary, the f32 op against
// the f64 template.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cross_entropy.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kRows = 21, kV = 37, kVPadded = 40;
const std::vector<int> kIgnoredRows = {2, 9, 17};

std::vector<std::int32_t> random_targets(std::uint64_t seed) {
  auto targets = test::random_ints(kRows, seed, 0, kV);
  targets[4] = kV - 1;  // the last real column
  for (int r : kIgnoredRows) targets[r] = kIgnoreIndex;
  return targets;
}

// Logits with padded columns set to large values: they would dominate the softmax if read.
std::vector<float> random_logits(std::uint64_t seed, float scale) {
  auto logits = test::random_floats(kRows * kVPadded, seed, -scale, scale);
  for (int r = 0; r < kRows; ++r)
    for (int v = kV; v < kVPadded; ++v) logits[r * kVPadded + v] = 50.0f + v;
  return logits;
}

TEST(CrossEntropy, ForwardMatchesNaiveLogSoftmax) {
  const auto targets = random_targets(1);
  const auto logits = test::convert<double>(random_logits(2, 4.0f));
  std::vector<double> losses(kRows, NAN), lse(kRows, NAN);
  cpu::cross_entropy_forward<double>(losses.data(), lse.data(), logits.data(), targets.data(),
                                     kRows, kVPadded, kV, kIgnoreIndex);
  std::vector<double> want_losses(kRows), want_lse(kRows);
  for (int r = 0; r < kRows; ++r) {
    double sum = 0;
    for (int v = 0; v < kV; ++v) sum += std::exp(logits[r * kVPadded + v]);
    want_lse[r] = std::log(sum);
    want_losses[r] =
        targets[r] == kIgnoreIndex ? 0.0 : want_lse[r] - logits[r * kVPadded + targets[r]];
  }
  test::expect_close("cross_entropy losses", losses, want_losses, 1e-13, 1e-13);
  test::expect_close("cross_entropy lse", lse, want_lse, 1e-13, 1e-13);
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  const auto targets = random_targets(3);
  auto logits = test::convert<double>(random_logits(4, 3.0f));
  const double dloss = 1.0 / (kRows - static_cast<double>(kIgnoredRows.size()));  // a mean
  std::vector<double> losses(kRows), lse(kRows);
  auto forward = [&] {
    cpu::cross_entropy_forward<double>(losses.data(), lse.data(), logits.data(), targets.data(),
                                       kRows, kVPadded, kV, kIgnoreIndex);
    double total = 0;
    for (double l : losses) total += l;
    return dloss * total;
  };
  const auto want = test::finite_difference_gradient(logits, forward);
  forward();
  std::vector<double> dlogits(logits.size(), NAN);
  cpu::cross_entropy_backward<double>(dlogits.data(), logits.data(), lse.data(), targets.data(),
                                      dloss, kRows, kVPadded, 0, kV, kIgnoreIndex);
  test::expect_close("cross_entropy dlogits vs finite differences", dlogits, want, 1e-9, 1e-6);

  std::vector<double> padded_and_ignored;
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVPadded; ++v)
      if (v >= kV || targets[r] == kIgnoreIndex)
        padded_and_ignored.push_back(dlogits[r * kVPadded + v]);
  test::expect_close("dlogits of padded columns and ignored rows", padded_and_ignored,
                     std::vector<double>(padded_and_ignored.size(), 0.0), 0, 0);
}

TEST(CrossEntropy, PaddedLogitsChangeNothing) {
  const auto targets = random_targets(5);
  auto logits = random_logits(6, 4.0f);
  auto run = [&](const std::vector<float>& l) {
    Tensor lt = Tensor::from_vector(l, {kRows, kVPadded});
    Tensor losses = Tensor::empty({kRows}), lse = Tensor::empty({kRows});
    Tensor targets_t = test::i32_tensor(targets, {kRows});
    cross_entropy_forward(losses, lse, lt, targets_t, kV);
    Tensor dlogits = Tensor::empty({kRows, kVPadded});
    cross_entropy_backward(dlogits, lt, lse, targets_t, 0.1f, kV);
    return std::pair{losses.to_vector(), dlogits.to_vector()};
  };
  const auto [losses, dlogits] = run(logits);
  for (int r = 0; r < kRows; ++r) logits[r * kVPadded + kV + 1] = (r % 2 ? -1e30f : NAN);
  const auto [losses2, dlogits2] = run(logits);
  test::expect_bitwise_equal("losses after changing padded logits", losses2, losses);
  test::expect_bitwise_equal("dlogits after changing padded logits", dlogits2, dlogits);
}

TEST(CrossEntropy, InPlaceBackwardMatchesSeparate) {
  const auto targets_v = random_targets(7);
  Tensor logits = Tensor::from_vector(random_logits(8, 5.0f), {kRows, kVPadded});
  Tensor targets = test::i32_tensor(targets_v, {kRows});
  Tensor losses = Tensor::empty({kRows}), lse = Tensor::empty({kRows});
  cross_entropy_forward(losses, lse, logits, targets, kV);
  Tensor dlogits = Tensor::empty({kRows, kVPadded});
  cross_entropy_backward(dlogits, logits, lse, targets, 0.25f, kV);
  cross_entropy_backward(logits, logits, lse, targets, 0.25f, kV);
  test::expect_bitwise_equal("dlogits in place", logits.to_vector(), dlogits.to_vector());
}

// The fused op against forward then backward, to rounding (the CPU takes each exponential
// once; an ignored row's gradient is zero whatever its logits). Also over a vocabulary of
// several of the CPU's chunks whose max grows from chunk to chunk, so each chunk's kept
// exponentials are rescaled.
void expect_forward_backward_is_forward_then_backward(const Tensor& logits,
                                                      const std::vector<std::int32_t>& targets_v,
                                                      std::int64_t vocab) {
  const std::int64_t rows = logits.size(0);
  const Tensor targets = test::i32_tensor(targets_v, {rows});
  Tensor want_losses = Tensor::empty({rows}), want_lse = Tensor::empty({rows});
  Tensor want = Tensor::empty(logits.shape());
  cross_entropy_forward(want_losses, want_lse, logits, targets, vocab);
  cross_entropy_backward(want, logits, want_lse, targets, 0.125f, vocab);
  // Into a separate dlogits, then over the logits in place (as the LM head calls it).
  Tensor losses = Tensor::empty({rows}), lse = Tensor::empty({rows});
  Tensor dlogits = Tensor::full(logits.shape(), NAN);
  cross_entropy_forward_backward(losses, lse, dlogits, logits, targets, 0.125f, vocab);
  test::expect_close("losses", losses.to_vector(), want_losses.to_vector(), 1e-6, 1e-6);
  test::expect_close("lse", lse.to_vector(), want_lse.to_vector(), 1e-6, 1e-6);
  // A few float roundings apart: exp(x - chunk max) * exp(chunk max - max) * dloss / sum
  // against exp(x - lse) * dloss, lse itself rounded (1.2e-6 seen on a generic x86-64 build).
  test::expect_close("dlogits", dlogits.to_vector(), want.to_vector(), 1e-12, 5e-6);
  Tensor in_place = logits.clone();
  Tensor losses_in_place = Tensor::empty({rows});
  cross_entropy_forward_backward(losses_in_place, lse, in_place, in_place, targets, 0.125f, vocab);
  test::expect_bitwise_equal("losses in place", losses_in_place.to_vector(), losses.to_vector());
  test::expect_bitwise_equal("dlogits in place", in_place.to_vector(), dlogits.to_vector());
}

TEST(CrossEntropy, ForwardBackwardIsForwardThenBackward) {
  const Tensor logits = Tensor::from_vector(random_logits(14, 5.0f), {kRows, kVPadded});
  expect_forward_backward_is_forward_then_backward(logits, random_targets(13), kV);

  constexpr int kWideRows = 3, kWide = 7000, kWidePadded = 7008;
  std::vector<float> wide = test::random_floats(kWideRows * kWidePadded, 15, -4.0f, 4.0f);
  for (int r = 0; r < kWideRows; ++r)
    for (int v = 0; v < kWidePadded; ++v) wide[r * kWidePadded + v] += 3.0f * v / kWide;
  const std::vector<std::int32_t> wide_targets = {5, kWide - 1, kIgnoreIndex};
  expect_forward_backward_is_forward_then_backward(
      Tensor::from_vector(wide, {kWideRows, kWidePadded}), wide_targets, kWide);

  // An ignored row's gradient is zero even where its logits are not finite.
  Tensor inf_row = Tensor::from_vector({1.0f, INFINITY, 2.0f, 0.0f}, {1, 4});
  Tensor one_loss = Tensor::empty({1}), one_lse = Tensor::empty({1}), dinf = Tensor::empty({1, 4});
  cross_entropy_forward_backward(one_loss, one_lse, dinf, inf_row,
                                 test::i32_tensor({kIgnoreIndex}, {1}), 0.5f, 3);
  EXPECT_EQ(one_loss.to_vector(), std::vector<float>{0.0f});
  EXPECT_EQ(dinf.to_vector(), std::vector<float>(4, 0.0f));

  // Misuse: dlogits of another shape.
  Tensor losses = Tensor::empty({kRows}), lse = Tensor::empty({kRows});
  Tensor wrong = Tensor::empty({kRows, kV});
  EXPECT_THROW(cross_entropy_forward_backward(losses, lse, wrong, logits,
                                              test::i32_tensor(random_targets(13), {kRows}),
                                              0.125f, kV),
               InternalError);
}

// Rows of several of the CPU's chunks (2048 columns) whose max rises a little, rises by far
// more than an exponential against the previous max could hold, falls, or starts far below
// the rest: each chunk's exponentials are taken against the max before it, rescaled, or taken
// again against its own max. The double template against a naive log-softmax, the float op
// against the double one, the fused op against forward then backward.
TEST(CrossEntropy, ChunksWhoseMaxRisesFallsOrJumps) {
  constexpr int kChunkRows = 4, kWide = 5 * 2048 + 300;
  std::vector<float> logits = test::random_floats(kChunkRows * kWide, 21, -4.0f, 4.0f);
  const auto add = [&](int row, int first, int last, float delta) {
    for (int v = first; v < last; ++v) logits[row * kWide + v] += delta;
  };
  // Kept within a few units of 0 where the max ends, so that forward then backward, whose
  // exponent x - lse is rounded at lse's magnitude, is a fair reference for the fused op.
  add(0, 0, kWide, -120.0f);
  add(0, 2 * 2048, 3 * 2048, 30.0f);   // a rise the running sum is rescaled across
  add(0, 3 * 2048, 4 * 2048, 120.0f);  // a jump of 90: e^90 overflows a float
  add(1, 0, 2048, -200.0f);            // a first chunk far below the rest
  for (int v = 0; v < kWide; ++v) logits[2 * kWide + v] -= 0.02f * v;  // falling
  logits[3 * kWide + kWide - 1] = 40.0f;  // the max in the last, short chunk
  const std::vector<std::int32_t> targets = {3 * 2048 + 7, 5, kWide - 1, kWide - 1};

  const std::vector<double> logits_d = test::convert<double>(logits);
  std::vector<double> losses(kChunkRows), lse(kChunkRows), want_lse(kChunkRows);
  cpu::cross_entropy_forward<double>(losses.data(), lse.data(), logits_d.data(), targets.data(),
                                     kChunkRows, kWide, kWide, kIgnoreIndex);
  for (int r = 0; r < kChunkRows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int v = 0; v < kWide; ++v) max = std::max(max, logits_d[r * kWide + v]);
    for (int v = 0; v < kWide; ++v) sum += std::exp(logits_d[r * kWide + v] - max);
    want_lse[r] = max + std::log(sum);
  }
  test::expect_close("double lse over chunks", lse, want_lse, 1e-12, 1e-13);

  const Tensor logits_t = Tensor::from_vector(logits, {kChunkRows, kWide});
  const Tensor targets_t = test::i32_tensor(targets, {kChunkRows});
  Tensor losses_t = Tensor::empty({kChunkRows}), lse_t = Tensor::empty({kChunkRows});
  cross_entropy_forward(losses_t, lse_t, logits_t, targets_t, kWide);
  test::expect_close("f32 lse over chunks", lse_t.to_vector(), want_lse, 1e-5, 1e-6);
  test::expect_close("f32 losses over chunks", losses_t.to_vector(), losses, 1e-5, 1e-5);
  expect_forward_backward_is_forward_then_backward(logits_t, targets, kWide);
}

// Rows that take the forward's rarer paths, against a naive log-softmax in double: a rise of
// about 84 (between the re-take's threshold, 64, and 85; 2048 e^84 overflow a float), a
// first chunk of -inf, and a rise of one ulp at 1.5e9 (128, where max + 64 rounds up to it).
// The fused op's lse too.
TEST(CrossEntropy, ForwardRowsOfRareRisesAndNoMax) {
  constexpr int kEdgeRows = 3, kWide = 3 * 2048 + 5;
  std::vector<float> logits = test::random_floats(kEdgeRows * kWide, 22, -4.0f, 4.0f);
  for (int v = 0; v < kWide; ++v) logits[v] = v >= 2048 && v < 4096 ? -12.0f : logits[v] - 100.0f;
  for (int v = 0; v < 2048; ++v) logits[kWide + v] = -INFINITY;
  constexpr float kHuge = 1500000128.0f;  // an odd multiple of its ulp, 128
  for (int v = 0; v < kWide; ++v)
    logits[2 * kWide + v] = v >= 2048 && v < 4096 ? kHuge + 128 : kHuge;
  const std::vector<std::int32_t> targets = {2100, 3000, 5};

  std::vector<double> want_lse(kEdgeRows);
  for (int r = 0; r < kEdgeRows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int v = 0; v < kWide; ++v) max = std::max(max, double{logits[r * kWide + v]});
    for (int v = 0; v < kWide; ++v) sum += std::exp(logits[r * kWide + v] - max);
    want_lse[r] = max + std::log(sum);
  }
  const Tensor logits_t = Tensor::from_vector(logits, {kEdgeRows, kWide});
  const Tensor targets_t = test::i32_tensor(targets, {kEdgeRows});
  Tensor losses = Tensor::empty({kEdgeRows}), lse = Tensor::empty({kEdgeRows});
  cross_entropy_forward(losses, lse, logits_t, targets_t, kWide);
  test::expect_close("forward lse", lse.to_vector(), want_lse, 1e-5, 1e-6);
  Tensor dlogits = Tensor::empty(logits_t.shape());
  cross_entropy_forward_backward(losses, lse, dlogits, logits_t, targets_t, 0.5f, kWide);
  test::expect_close("fused lse", lse.to_vector(), want_lse, 1e-5, 1e-6);
  // The first two rows' softmax, which the fused op computes, sums to 1 (dlogits minus the
  // target's -dloss, over dloss).
  const std::vector<float> d = dlogits.to_vector();
  for (int r = 0; r < 2; ++r) {
    double total = 0;
    for (int v = 0; v < kWide; ++v) total += d[r * kWide + v];
    EXPECT_NEAR((total + 0.5) / 0.5, 1.0, 1e-5) << "row " << r;
  }
}

TEST(CrossEntropy, TargetOutsideVocabularyThrows) {
  auto targets = random_targets(9);
  targets[3] = kV;  // a padded column is not a token
  Tensor logits = Tensor::from_vector(random_logits(10, 1.0f), {kRows, kVPadded});
  Tensor losses = Tensor::empty({kRows}), lse = Tensor::empty({kRows});
  EXPECT_THROW(cross_entropy_forward(losses, lse, logits, test::i32_tensor(targets, {kRows}), kV),
               DataError);
}

TEST(CrossEntropy, FloatOpMatchesDoubleTemplate) {
  const auto targets = random_targets(11);
  const auto logitsf = random_logits(12, 8.0f);
  const auto logits = test::convert<double>(logitsf);
  constexpr float kDloss = 1.0f / 18.0f;
  std::vector<double> losses(kRows), lse(kRows), dlogits(logits.size());
  cpu::cross_entropy_forward<double>(losses.data(), lse.data(), logits.data(), targets.data(),
                                     kRows, kVPadded, kV, kIgnoreIndex);
  cpu::cross_entropy_backward<double>(dlogits.data(), logits.data(), lse.data(), targets.data(),
                                      kDloss, kRows, kVPadded, 0, kV, kIgnoreIndex);

  Tensor logits_t = Tensor::from_vector(logitsf, {kRows, kVPadded});
  Tensor targets_t = test::i32_tensor(targets, {kRows});
  Tensor losses_t = Tensor::empty({kRows}), lse_t = Tensor::empty({kRows});
  cross_entropy_forward(losses_t, lse_t, logits_t, targets_t, kV);
  Tensor dlogits_t = Tensor::full({kRows, kVPadded}, NAN);
  cross_entropy_backward(dlogits_t, logits_t, lse_t, targets_t, kDloss, kV);
  test::expect_close("cross_entropy f32 losses", losses_t.to_vector(), losses, 1e-5, 1e-5);
  test::expect_close("cross_entropy f32 lse", lse_t.to_vector(), lse, 1e-5, 1e-6);
  test::expect_close("cross_entropy f32 dlogits", dlogits_t.to_vector(), dlogits, 1e-7, 1e-5);
}

}  // namespace
}  // namespace ternion
