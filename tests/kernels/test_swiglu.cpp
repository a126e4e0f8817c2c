// SwiGLU: the forward against silu(g) u written out in double, the backward against finite
// differences, the f32 op against the f64 template, saturation at large |gate|, dgate_up in
// place of gate_up, bf16 staging (exactly the f32 op on rounded inputs) and the operands it
// refuses.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/swiglu.h"
#include "tests/kernels/bf16_test_util.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kRows = 21, kFeatures = 13;
constexpr int kN = kRows * kFeatures;

// gate_up [rows, 2F] with gates in [lo, hi) and ups in [-1, 1).
std::vector<float> random_gate_up(int rows, int features, std::uint64_t seed, float lo = -6.0f,
                                  float hi = 6.0f) {
  const auto n = static_cast<std::size_t>(rows * features);
  const auto gates = test::random_floats(n, seed, lo, hi), ups = test::random_floats(n, seed + 1);
  std::vector<float> gate_up(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    gate_up[2 * i] = gates[i];
    gate_up[2 * i + 1] = ups[i];
  }
  return gate_up;
}

TEST(SwiGlu, ForwardMatchesFormula) {
  const auto gate_up = test::convert<double>(random_gate_up(kRows, kFeatures, 1));
  std::vector<double> out(kN), want(kN);
  cpu::swiglu_forward<double>(out.data(), gate_up.data(), kN);
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kFeatures; ++j) {
      const double g = gate_up[r * 2 * kFeatures + 2 * j];
      const double u = gate_up[r * 2 * kFeatures + 2 * j + 1];
      want[r * kFeatures + j] = g / (1 + std::exp(-g)) * u;
    }
  test::expect_close("swiglu f64 vs formula", out, want, 1e-15, 1e-13);
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  auto gate_up = test::convert<double>(random_gate_up(kRows, kFeatures, 2, -4.0f, 4.0f));
  const auto r = test::convert<double>(test::random_floats(kN, 3));
  std::vector<double> out(kN);
  auto loss = [&] {
    cpu::swiglu_forward<double>(out.data(), gate_up.data(), kN);
    return test::dot(out, r);
  };
  const auto want = test::finite_difference_gradient(gate_up, loss);
  std::vector<double> dgate_up(gate_up.size(), NAN);  // overwritten, never read
  cpu::swiglu_backward<double>(dgate_up.data(), r.data(), gate_up.data(), kN);
  test::expect_close("swiglu dgate_up vs finite differences", dgate_up, want, 1e-8, 1e-7);
}

TEST(SwiGlu, FloatOpMatchesDoubleTemplate) {
  const int rows = 17, features = 59;
  const auto gate_upf = random_gate_up(rows, features, 4, -10.0f, 10.0f);
  const auto doutf = test::random_floats(static_cast<std::size_t>(rows * features), 6);
  const auto gate_up = test::convert<double>(gate_upf), dout = test::convert<double>(doutf);
  std::vector<double> out(dout.size()), dgate_up(gate_up.size());
  cpu::swiglu_forward<double>(out.data(), gate_up.data(), rows * features);
  cpu::swiglu_backward<double>(dgate_up.data(), dout.data(), gate_up.data(), rows * features);

  // A 3-d gate_up: the pairs run on across rows.
  const Tensor gate_upt = Tensor::from_vector(gate_upf, {1, rows, 2 * features});
  Tensor outt = Tensor::empty({1, rows, features}), dgate_upt = Tensor::empty(gate_upt.shape());
  swiglu_forward(outt, gate_upt);
  swiglu_backward(dgate_upt, Tensor::from_vector(doutf, {1, rows, features}), gate_upt);
  test::expect_close("swiglu f32 forward", outt.to_vector(), out, 1e-6, 1e-6);
  test::expect_close("swiglu f32 backward", dgate_upt.to_vector(), dgate_up, 1e-6, 1e-6);
}

TEST(SwiGlu, SaturatesWithoutNaN) {
  // silu(g) -> g for large g and -> 0 for very negative g, silu' -> 1 and 0: finite everywhere,
  // the f32 op within rounding of the formulas in double, and the clamped tail (g below -80)
  // within 1e-30 of them.
  const std::vector<float> gates = {-1e4f, -200.0f, -90.0f, -30.0f, 0.0f,
                                    30.0f, 90.0f,   200.0f, 1e4f};
  const auto n = static_cast<std::int64_t>(gates.size());
  std::vector<float> gate_up;
  for (float g : gates) {
    gate_up.push_back(g);
    gate_up.push_back(2.0f);
  }
  const Tensor gu = Tensor::from_vector(gate_up, {n, 2});
  Tensor out = Tensor::empty({n, 1}), dgu = Tensor::empty({n, 2});
  swiglu_forward(out, gu);
  swiglu_backward(dgu, Tensor::full({n, 1}, 1.0f), gu);
  std::vector<double> want_out, want_dgu;
  for (const double g : gates) {
    const double s = 1 / (1 + std::exp(-g));
    want_out.push_back(2 * g * s);
    want_dgu.push_back(2 * s * (1 + g * (1 - s)));  // up x silu'(g)
    want_dgu.push_back(g * s);                      // silu(g)
  }
  test::expect_close("swiglu at large |gate|", out.to_vector(), want_out, 1e-30, 1e-6);
  test::expect_close("swiglu' at large |gate|", dgu.to_vector(), want_dgu, 1e-30, 1e-6);
}

TEST(SwiGlu, BackwardInPlaceOfGateUp) {
  const Tensor gate_up =
      Tensor::from_vector(random_gate_up(kRows, kFeatures, 7), {kRows, 2 * kFeatures});
  const Tensor dout = test::random_f32({kRows, kFeatures}, 9);
  Tensor want = Tensor::empty(gate_up.shape());
  swiglu_backward(want, dout, gate_up);
  Tensor in_place = gate_up.clone();
  swiglu_backward(in_place, dout, in_place);
  test::expect_bitwise_equal("swiglu backward in place", in_place.to_vector(), want.to_vector());
}

TEST(SwiGlu, Bf16IsTheF32OpOnRoundedInputs) {
  using test::rounded;
  using test::to_bf16;
  const Tensor gate_up =
      Tensor::from_vector(random_gate_up(kRows, kFeatures, 10), {kRows, 2 * kFeatures});
  const Tensor dout = test::random_f32({kRows, kFeatures}, 12);
  const auto bf16_values = [](const Tensor& t) {
    return as_f32(t.dtype() == DType::BF16 ? t : to_bf16(t)).to_vector();
  };
  Tensor want_out = Tensor::empty({kRows, kFeatures}), want_dgu = Tensor::empty(gate_up.shape());
  swiglu_forward(want_out, rounded(gate_up));
  swiglu_backward(want_dgu, rounded(dout), rounded(gate_up));
  Tensor out = Tensor::empty({kRows, kFeatures}, DType::BF16);
  Tensor dgu = Tensor::empty(gate_up.shape(), DType::BF16);
  swiglu_forward(out, to_bf16(gate_up));
  swiglu_backward(dgu, to_bf16(dout), to_bf16(gate_up));
  test::expect_bitwise_equal("bf16 swiglu out", bf16_values(out), bf16_values(want_out));
  test::expect_bitwise_equal("bf16 swiglu dgate_up", bf16_values(dgu), bf16_values(want_dgu));
}

TEST(SwiGlu, RefusesMisuse) {
  const Tensor gate_up = Tensor::zeros({3, 8});
  Tensor out = Tensor::empty({3, 4});
  EXPECT_NO_THROW(swiglu_forward(out, gate_up));
  Tensor odd = Tensor::zeros({3, 7}), out3 = Tensor::empty({3, 3});
  EXPECT_THROW(swiglu_forward(out3, odd), InternalError) << "odd last dimension";
  Tensor wide = Tensor::empty({3, 8});
  EXPECT_THROW(swiglu_forward(wide, gate_up), InternalError) << "out not half of gate_up";
  Tensor bf16_out = Tensor::empty({3, 4}, DType::BF16);
  EXPECT_THROW(swiglu_forward(bf16_out, gate_up), InternalError) << "mixed dtypes";
  Tensor i32_out = Tensor::empty({3, 4}, DType::I32);
  const Tensor i32_gate_up = Tensor::zeros({3, 8}, DType::I32);
  EXPECT_THROW(swiglu_forward(i32_out, i32_gate_up), InternalError) << "integer tensors";
  const Tensor strided = Tensor::zeros({3, 16}).slice(1, 0, 8);
  EXPECT_THROW(swiglu_forward(out, strided), InternalError) << "non-contiguous gate_up";
  Tensor aliasing = gate_up.view({-1}).slice(0, 0, 12).view({3, 4});
  EXPECT_THROW(swiglu_forward(aliasing, gate_up), InternalError) << "out aliasing gate_up";

  Tensor dgu = Tensor::empty({3, 8});
  const Tensor dout = Tensor::zeros({3, 4});
  EXPECT_NO_THROW(swiglu_backward(dgu, dout, gate_up));
  Tensor narrow = Tensor::empty({3, 4});
  EXPECT_THROW(swiglu_backward(narrow, dout, gate_up), InternalError) << "dgate_up of out's shape";
  EXPECT_THROW(swiglu_backward(dgu, Tensor::zeros({3, 8}), gate_up), InternalError)
      << "dout of gate_up's shape";
  const Tensor bf16_dout = test::to_bf16(dout);
  EXPECT_THROW(swiglu_backward(dgu, bf16_dout, gate_up), InternalError) << "mixed dtypes";
  const Tensor dout_in_dgu = dgu.view({-1}).slice(0, 0, 12).view({3, 4});
  EXPECT_THROW(swiglu_backward(dgu, dout_in_dgu, gate_up), InternalError)
      << "dgate_up aliasing dout";
}

}  // namespace
}  // namespace ternion
