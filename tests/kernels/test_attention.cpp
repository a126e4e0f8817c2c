// Causal attention: forward against a naive implementation (full score matrix, causal mask,
// explicit softmax), the probabilities' shape (rows sum to 1, zero above the diagonal), dqkv
// against finite differences, the f32 op against the f64 template.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kB = 3, kT = 7, kH = 2, kHs = 5;
constexpr int kC = kH * kHs;
constexpr std::size_t kQkvSize = kB * kT * 3 * kC, kOutSize = kB * kT * kC,
                      kProbsSize = kB * kH * kT * kT;

// qkv row layout per head: [q | k | v] (kernels/attention.h).
double qkv_at(const std::vector<double>& qkv, int b, int t, int h, int part, int d) {
  return qkv[((b * kT + t) * 3 * kC) + h * 3 * kHs + part * kHs + d];
}

void naive_attention(std::vector<double>& out, std::vector<double>& probs,
                     const std::vector<double>& qkv) {
  for (int b = 0; b < kB; ++b) {
    for (int h = 0; h < kH; ++h) {
      for (int i = 0; i < kT; ++i) {
        std::vector<double> scores(kT);
        for (int j = 0; j < kT; ++j) {
          double s = 0;
          for (int d = 0; d < kHs; ++d)
            s += qkv_at(qkv, b, i, h, 0, d) * qkv_at(qkv, b, j, h, 1, d);
          scores[j] =
              j <= i ? s / std::sqrt(double(kHs)) : -std::numeric_limits<double>::infinity();
        }
        double total = 0;
        for (int j = 0; j < kT; ++j) total += std::exp(scores[j]);
        for (int j = 0; j < kT; ++j)
          probs[((b * kH + h) * kT + i) * kT + j] = std::exp(scores[j]) / total;
        for (int d = 0; d < kHs; ++d) {
          double o = 0;
          for (int j = 0; j < kT; ++j)
            o += probs[((b * kH + h) * kT + i) * kT + j] * qkv_at(qkv, b, j, h, 2, d);
          out[(b * kT + i) * kC + h * kHs + d] = o;
        }
      }
    }
  }
}

std::vector<double> random_qkv(std::uint64_t seed) {
  return test::convert<double>(test::random_floats(kQkvSize, seed, -1.5f, 1.5f));
}

TEST(Attention, ForwardMatchesNaive) {
  const auto qkv = random_qkv(1);
  std::vector<double> out(kOutSize), probs(kProbsSize, NAN);
  cpu::attention_forward<double>(out.data(), probs.data(), qkv.data(), kB, kT, kH, kHs);
  std::vector<double> want_out(kOutSize), want_probs(kProbsSize);
  naive_attention(want_out, want_probs, qkv);
  test::expect_close("attention out", out, want_out, 1e-13, 1e-12);
  test::expect_close("attention probs", probs, want_probs, 1e-14, 1e-12);
}

TEST(Attention, ProbsAreCausalDistributions) {
  Tensor qkv = Tensor::from_vector(test::random_floats(kQkvSize, 2, -3.0f, 3.0f), {kB, kT, 3 * kC});
  Tensor out = Tensor::empty({kB, kT, kC}), probs = Tensor::full({kB, kH, kT, kT}, NAN);
  attention_forward(out, probs, qkv, kH);
  const auto p = probs.to_vector();
  std::vector<double> row_sums, above_diagonal;
  for (int row = 0; row < kB * kH * kT; ++row) {
    const int i = row % kT;
    double sum = 0;
    for (int j = 0; j < kT; ++j) {
      const float v = p[row * kT + j];
      if (j <= i) {
        sum += v;
        EXPECT_GE(v, 0.0f) << "row " << row << " col " << j;
      } else {
        above_diagonal.push_back(v);
      }
    }
    row_sums.push_back(sum);
  }
  test::expect_close("attention probs row sums", row_sums,
                     std::vector<double>(row_sums.size(), 1.0), 1e-6, 0);
  test::expect_close("attention probs above the diagonal", above_diagonal,
                     std::vector<double>(above_diagonal.size(), 0.0), 0, 0);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  auto qkv = random_qkv(3);
  const auto r = test::convert<double>(test::random_floats(kOutSize, 4));
  std::vector<double> out(kOutSize), probs(kProbsSize);
  auto forward = [&] {
    cpu::attention_forward<double>(out.data(), probs.data(), qkv.data(), kB, kT, kH, kHs);
    return test::dot(out, r);
  };
  const auto want = test::finite_difference_gradient(qkv, forward);
  forward();
  std::vector<double> dqkv(kQkvSize, NAN);  // overwritten
  cpu::attention_backward<double>(dqkv.data(), r.data(), qkv.data(), probs.data(), kB, kT, kH, kHs);
  test::expect_close("attention dqkv vs finite differences", dqkv, want, 1e-8, 1e-6);
}

TEST(Attention, FloatOpMatchesDoubleTemplate) {
  const auto qkvf = test::random_floats(kQkvSize, 5, -2.0f, 2.0f);
  const auto doutf = test::random_floats(kOutSize, 6);
  const auto qkv = test::convert<double>(qkvf), dout = test::convert<double>(doutf);
  std::vector<double> out(kOutSize), probs(kProbsSize), dqkv(kQkvSize);
  cpu::attention_forward<double>(out.data(), probs.data(), qkv.data(), kB, kT, kH, kHs);
  cpu::attention_backward<double>(dqkv.data(), dout.data(), qkv.data(), probs.data(), kB, kT, kH,
                                  kHs);

  Tensor qkvt = Tensor::from_vector(qkvf, {kB, kT, 3 * kC});
  Tensor outt = Tensor::empty({kB, kT, kC}), probst = Tensor::empty({kB, kH, kT, kT});
  attention_forward(outt, probst, qkvt, kH);
  Tensor dqkvt = Tensor::full({kB, kT, 3 * kC}, NAN);
  attention_backward(dqkvt, Tensor::from_vector(doutf, {kB, kT, kC}), qkvt, probst, kH);
  test::expect_close("attention f32 out", outt.to_vector(), out, 1e-6, 1e-5);
  test::expect_close("attention f32 probs", probst.to_vector(), probs, 1e-6, 1e-5);
  test::expect_close("attention f32 dqkv", dqkvt.to_vector(), dqkv, 1e-5, 1e-4);
}

}  // namespace
}  // namespace ternion
