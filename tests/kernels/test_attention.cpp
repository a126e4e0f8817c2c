// Causal attention: forward (out and the log-sum-exp) against a naive implementation (full
// score matrix, causal mask, explicit softmax), causality (no output row sees a later token),
// dqkv against finite differences, the f32 op against the f64 template, bad operands.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kB = 3, kT = 7, kH = 2, kHs = 5;
constexpr int kC = kH * kHs;
constexpr std::size_t kQkvSize = kB * kT * 3 * kC, kOutSize = kB * kT * kC,
                      kLseSize = kB * kH * kT;

// qkv row layout per head: [q | k | v] (kernels/attention.h).
double qkv_at(const std::vector<double>& qkv, int b, int t, int h, int part, int d) {
  return qkv[((b * kT + t) * 3 * kC) + h * 3 * kHs + part * kHs + d];
}

void naive_attention(std::vector<double>& out, std::vector<double>& lse,
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
        lse[(b * kH + h) * kT + i] = std::log(total);
        for (int d = 0; d < kHs; ++d) {
          double o = 0;
          for (int j = 0; j < kT; ++j)
            o += std::exp(scores[j]) / total * qkv_at(qkv, b, j, h, 2, d);
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
  std::vector<double> out(kOutSize), lse(kLseSize, NAN);
  cpu::attention_forward<double>(out.data(), lse.data(), qkv.data(), kB, kT, kH, kHs);
  std::vector<double> want_out(kOutSize), want_lse(kLseSize);
  naive_attention(want_out, want_lse, qkv);
  test::expect_close("attention out", out, want_out, 1e-13, 1e-12);
  test::expect_close("attention lse", lse, want_lse, 1e-13, 1e-12);
}

// Changing the keys and values of tokens after t leaves every output row <= t as it was.
TEST(Attention, RowsDoNotSeeLaterTokens) {
  const auto qkvf = test::random_floats(kQkvSize, 2, -3.0f, 3.0f);
  Tensor qkv = Tensor::from_vector(qkvf, {kB, kT, 3 * kC});
  Tensor out = Tensor::empty({kB, kT, kC}), lse = Tensor::empty({kB, kH, kT});
  attention_forward(out, lse, qkv, kH);
  constexpr int kCut = 3;  // tokens > kCut change
  auto changed = qkvf;
  for (int b = 0; b < kB; ++b)
    for (int t = kCut + 1; t < kT; ++t)
      for (int c = 0; c < 3 * kC; ++c) changed[(b * kT + t) * 3 * kC + c] += 0.5f;
  Tensor out2 = Tensor::empty({kB, kT, kC}), lse2 = Tensor::empty({kB, kH, kT});
  attention_forward(out2, lse2, Tensor::from_vector(changed, {kB, kT, 3 * kC}), kH);
  const auto o1 = out.to_vector(), o2 = out2.to_vector();
  std::vector<float> early1, early2, late1, late2;
  for (int b = 0; b < kB; ++b)
    for (int t = 0; t < kT; ++t)
      for (int c = 0; c < kC; ++c) {
        const std::size_t i = (b * kT + t) * kC + c;
        (t <= kCut ? early1 : late1).push_back(o1[i]);
        (t <= kCut ? early2 : late2).push_back(o2[i]);
      }
  test::expect_bitwise_equal("attention rows up to the cut", early2, early1);
  EXPECT_NE(late1, late2) << "the later rows must change (the test's own check)";
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  auto qkv = random_qkv(3);
  const auto r = test::convert<double>(test::random_floats(kOutSize, 4));
  std::vector<double> out(kOutSize), lse(kLseSize);
  auto forward = [&] {
    cpu::attention_forward<double>(out.data(), lse.data(), qkv.data(), kB, kT, kH, kHs);
    return test::dot(out, r);
  };
  const auto want = test::finite_difference_gradient(qkv, forward);
  forward();
  std::vector<double> dqkv(kQkvSize, NAN);  // overwritten
  cpu::attention_backward<double>(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), kB,
                                  kT, kH, kHs);
  test::expect_close("attention dqkv vs finite differences", dqkv, want, 1e-8, 1e-6);
}

TEST(Attention, FloatOpMatchesDoubleTemplate) {
  const auto qkvf = test::random_floats(kQkvSize, 5, -2.0f, 2.0f);
  const auto doutf = test::random_floats(kOutSize, 6);
  const auto qkv = test::convert<double>(qkvf), dout = test::convert<double>(doutf);
  std::vector<double> out(kOutSize), lse(kLseSize), dqkv(kQkvSize);
  cpu::attention_forward<double>(out.data(), lse.data(), qkv.data(), kB, kT, kH, kHs);
  cpu::attention_backward<double>(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), kB,
                                  kT, kH, kHs);

  Tensor qkvt = Tensor::from_vector(qkvf, {kB, kT, 3 * kC});
  Tensor outt = Tensor::empty({kB, kT, kC}), lset = Tensor::empty({kB, kH, kT});
  attention_forward(outt, lset, qkvt, kH);
  Tensor dqkvt = Tensor::full({kB, kT, 3 * kC}, NAN);
  attention_backward(dqkvt, Tensor::from_vector(doutf, {kB, kT, kC}), qkvt, outt, lset, kH);
  test::expect_close("attention f32 out", outt.to_vector(), out, 1e-6, 1e-5);
  test::expect_close("attention f32 lse", lset.to_vector(), lse, 1e-6, 1e-5);
  test::expect_close("attention f32 dqkv", dqkvt.to_vector(), dqkv, 1e-5, 1e-4);
}

// `call` throws InternalError whose message contains `needle`.
template <class Call>
void expect_refused(Call call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Attention, RefusesBadOperands) {
  const Tensor qkv = Tensor::zeros({kB, kT, 3 * kC});
  Tensor out = Tensor::empty({kB, kT, kC}), lse = Tensor::empty({kB, kH, kT});
  Tensor lse_wrong_shape = Tensor::empty({kB, kH, kT, kT});
  Tensor lse_bf16 = Tensor::empty({kB, kH, kT}, DType::BF16);
  expect_refused([&] { attention_forward(out, lse_wrong_shape, qkv, kH); }, "lse");
  expect_refused([&] { attention_forward(out, lse_bf16, qkv, kH); }, "f32");
  Tensor dqkv = Tensor::empty({kB, kT, 3 * kC});
  Tensor wrong_out = Tensor::empty({kB, kT - 1, kC});
  expect_refused([&] { attention_backward(dqkv, out, qkv, wrong_out, lse, kH); }, "out");
}

TEST(AttentionKernel, ParsesItsNames) {
  AttentionKernel kernel = AttentionKernel::cublas;
  for (const char* name : {"auto", "cudnn", "cublas"}) {
    ASSERT_TRUE(parse_attention_kernel(name, kernel)) << name;
    EXPECT_EQ(attention_kernel_name(kernel), name);
  }
  EXPECT_FALSE(parse_attention_kernel("flash", kernel));
}

}  // namespace
}  // namespace ternion
