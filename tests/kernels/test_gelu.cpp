// GELU: the sigmoid form against GPT-2's tanh formula, backward against finite differences,
// the f32 op against the f64 template, saturation at large |x|, in-place use, and the
// backward with the linear layer's bias gradient against backward + bias_add_backward; and the
// run-time check of cuBLASLt's GELU epilogues (kernels/gelu_epilogue_check.h): what it accepts
// and what it rejects.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "framework/bfloat16.h"
#include "kernels/gelu_epilogue_check.h"
#include "kernels/gelu_math.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/bias_add.h"
#include "kernels/gelu.h"
#include "tests/kernels/bf16_test_util.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

double gelu_tanh_formula(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

constexpr std::size_t kN = 37;

TEST(Gelu, ForwardMatchesTanhFormula) {
  const auto x = test::convert<double>(test::random_floats(kN, 1, -5.0f, 5.0f));
  std::vector<double> out(kN), want(kN);
  cpu::gelu_forward<double>(out.data(), x.data(), kN);
  for (std::size_t i = 0; i < kN; ++i) want[i] = gelu_tanh_formula(x[i]);
  test::expect_close("gelu f64 vs tanh formula", out, want, 1e-15, 1e-13);
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  auto x = test::convert<double>(test::random_floats(kN, 2, -4.0f, 4.0f));
  const auto r = test::convert<double>(test::random_floats(kN, 3));
  std::vector<double> out(kN);
  auto loss = [&] {
    cpu::gelu_forward<double>(out.data(), x.data(), kN);
    return test::dot(out, r);
  };
  const auto want = test::finite_difference_gradient(x, loss);
  std::vector<double> dx(kN, NAN);  // overwritten, never read
  cpu::gelu_backward<double>(dx.data(), x.data(), r.data(), kN);
  test::expect_close("gelu dx vs finite differences", dx, want, 1e-8, 1e-7);
}

TEST(Gelu, FloatOpMatchesDoubleTemplate) {
  const auto xf = test::random_floats(1003, 4, -6.0f, 6.0f);
  const auto doutf = test::random_floats(1003, 5);
  const auto x = test::convert<double>(xf), dout = test::convert<double>(doutf);
  std::vector<double> out(x.size()), dx(x.size());
  cpu::gelu_forward<double>(out.data(), x.data(), 1003);
  cpu::gelu_backward<double>(dx.data(), x.data(), dout.data(), 1003);

  Tensor xt = Tensor::from_vector(xf, {17, 59});
  Tensor doutt = Tensor::from_vector(doutf, {17, 59});
  Tensor outt = Tensor::empty({17, 59}), dxt = Tensor::empty({17, 59});
  gelu_forward(outt, xt);
  gelu_backward(dxt, xt, doutt);
  test::expect_close("gelu f32 forward", outt.to_vector(), out, 1e-6, 1e-6);
  test::expect_close("gelu f32 backward", dxt.to_vector(), dx, 1e-6, 1e-6);
}

TEST(Gelu, SaturatesWithoutNaN) {
  const std::vector<float> xs = {-3e38f, -1e20f, -1e12f, -1e4f, -200.0f, -90.0f, -30.0f, 0.0f,
                                 30.0f,  90.0f,  200.0f, 1e4f, 1e12f,  1e20f,  3e38f};
  const auto n = static_cast<std::int64_t>(xs.size());
  Tensor x = Tensor::from_vector(xs, {n}), out = Tensor::empty({n}), dx = Tensor::empty({n});
  gelu_forward(out, x);
  gelu_backward(dx, x, Tensor::full({n}, 1.0f));
  std::vector<double> want_out, want_dx;
  for (float v : xs) {
    want_out.push_back(v > 0 ? v : 0.0);
    want_dx.push_back(v > 0 ? 1.0 : (v < 0 ? 0.0 : 0.5));
  }
  test::expect_close("gelu at large |x|", out.to_vector(), want_out, 1e-20, 0);
  test::expect_close("gelu' at large |x|", dx.to_vector(), want_dx, 1e-20, 0);
}

TEST(Gelu, InPlaceMatchesOutOfPlace) {
  const auto xs = test::random_floats(500, 6, -3.0f, 3.0f);
  const auto douts = test::random_floats(500, 7);
  Tensor x = Tensor::from_vector(xs, {500}), out = Tensor::empty({500});
  gelu_forward(out, x);
  Tensor dout = Tensor::from_vector(douts, {500}), dx = Tensor::empty({500});
  gelu_backward(dx, x, dout);
  Tensor in_place = x.clone();
  gelu_forward(in_place, in_place);
  test::expect_bitwise_equal("gelu forward in place", in_place.to_vector(), out.to_vector());
  gelu_backward(dout, x, dout);
  test::expect_bitwise_equal("gelu backward in place", dout.to_vector(), dx.to_vector());
}

// The bias gradient in the backward's pass (the CPU's for f32) is bit for bit the backward
// then bias_add_backward: a narrow shape, and one of several of the CPU's column blocks with a
// partial last one and enough elements for the thread team; into dx and over dout in place.
TEST(Gelu, BackwardWithBiasGradientIsBackwardThenBiasAddBackward) {
  for (const auto& [rows, cols] : {std::pair{37, 11}, std::pair{23, 1100}}) {
    const Tensor x = Tensor::from_vector(test::random_floats(rows * cols, 8, -3.0f, 3.0f),
                                         {rows, cols});
    const Tensor dout = Tensor::from_vector(test::random_floats(rows * cols, 9), {rows, cols});
    const Tensor dbias0 = Tensor::from_vector(test::random_floats(cols, 10), {cols});
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(std::string(bf16 ? "bf16 " : "f32 ") + std::to_string(cols) + " columns");
      const Tensor xt = bf16 ? test::to_bf16(x) : x, doutt = bf16 ? test::to_bf16(dout) : dout;
      Tensor want_dx = Tensor::empty({rows, cols}, xt.dtype());
      Tensor want_dbias = dbias0.clone();
      gelu_backward(want_dx, xt, doutt);
      bias_add_backward(want_dbias, want_dx);
      Tensor dx = Tensor::empty({rows, cols}, xt.dtype());
      Tensor dbias = dbias0.clone();
      gelu_backward(dx, xt, doutt, &dbias);
      test::expect_bitwise_equal("dx", as_f32(dx).to_vector(), as_f32(want_dx).to_vector());
      test::expect_bitwise_equal("dbias", dbias.to_vector(), want_dbias.to_vector());
      Tensor in_place = doutt.clone();
      Tensor dbias_in_place = dbias0.clone();
      gelu_backward(in_place, xt, in_place, &dbias_in_place);
      test::expect_bitwise_equal("dx in place", as_f32(in_place).to_vector(),
                                 as_f32(want_dx).to_vector());
      test::expect_bitwise_equal("dbias in place", dbias_in_place.to_vector(),
                                 want_dbias.to_vector());
    }
  }
  const Tensor x = Tensor::zeros({4, 11}), dout = Tensor::zeros({4, 11});
  Tensor wrong = Tensor::zeros({12});
  Tensor dx = Tensor::empty({4, 11});
  EXPECT_THROW(gelu_backward(dx, x, dout, &wrong), InternalError);
}

// The sweep cuda::gelu_epilogues_agree() judges: [-8, 8], bf16 inputs.
std::vector<double> epilogue_sweep() {
  std::vector<double> x;
  for (int i = 0; i <= 2048; ++i)
    x.push_back(bf16_to_float(float_to_bf16(static_cast<float>(-8.0 + i / 128.0))));
  return x;
}

double bf16_rounded(double v) { return bf16_to_float(float_to_bf16(static_cast<float>(v))); }

// The judgement of candidate GELU implementations `f` rounded to bf16, for gelu and gelu'.
GeluDeviation judge(double (*f)(double), double (*reference)(double)) {
  const std::vector<double> x = epilogue_sweep();
  std::vector<double> got, want;
  for (double v : x) {
    got.push_back(bf16_rounded(f(v)));
    want.push_back(reference(v));
  }
  return worst_gelu_deviation(x, got, want);
}

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_erf_derivative(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
// The tanh form with tanh.approx.f32's relative error (2^-11) on tanh: fine near 0, far off in
// the negative tail where 1 + tanh cancels.
double gelu_rough_tanh(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u) * (1.0 + 0x1p-11));
}
double gelu_float(double x) {  // our own kernel's math in F32
  return static_cast<double>(gelu_value<float>(static_cast<float>(x)));
}
double gelu_float_derivative(double x) {
  return static_cast<double>(gelu_derivative<float>(static_cast<float>(x)));
}

TEST(GeluEpilogueCheck, AcceptsTheTanhFormRoundedToBf16) {
  EXPECT_TRUE(judge(gelu_tanh_reference, gelu_tanh_reference).agrees());
  EXPECT_TRUE(judge(gelu_tanh_derivative_reference, gelu_tanh_derivative_reference).agrees());
  // Our own kernels' F32 math, rounded to bf16, is within the tolerance too.
  const GeluDeviation ours = judge(gelu_float, gelu_tanh_reference);
  EXPECT_TRUE(ours.agrees()) << ours.worst << " tolerances at x = " << ours.x;
  EXPECT_TRUE(judge(gelu_float_derivative, gelu_tanh_derivative_reference).agrees());
}

TEST(GeluEpilogueCheck, RejectsTheErfFormAndACoarseTanh) {
  const GeluDeviation erf = judge(gelu_erf, gelu_tanh_reference);
  EXPECT_FALSE(erf.agrees());
  EXPECT_LT(erf.x, -1.0) << "the forms differ most, relatively, in the negative tail";
  EXPECT_FALSE(judge(gelu_erf_derivative, gelu_tanh_derivative_reference).agrees());
  EXPECT_FALSE(judge(gelu_rough_tanh, gelu_tanh_reference).agrees());
}

TEST(GeluEpilogueCheck, NanDisagrees) {
  const std::vector<double> x{0.5, 1.0}, want{gelu_tanh_reference(0.5), gelu_tanh_reference(1.0)};
  const std::vector<double> got{want[0], std::nan("")};
  const GeluDeviation d = worst_gelu_deviation(x, got, want);
  EXPECT_FALSE(d.agrees());
  EXPECT_EQ(d.x, 1.0);
}

}  // namespace
}  // namespace ternion
