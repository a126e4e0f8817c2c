// Bias add: forward against a loop, backward (which accumulates) against finite differences,
// the f32 op against the f64 template.
#include <vector>

#include "kernels/bias_add.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kRows = 21, kCols = 10;  // B=3, T=7, C=10

TEST(BiasAdd, ForwardAddsBiasToEveryRow) {
  const auto x = test::random_floats(kRows * kCols, 1), bias = test::random_floats(kCols, 2);
  Tensor out = Tensor::from_vector(x, {3, 7, kCols});
  bias_add_forward(out, Tensor::from_vector(bias, {kCols}));
  std::vector<float> want(x.size());
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) want[r * kCols + c] = x[r * kCols + c] + bias[c];
  test::expect_bitwise_equal("bias_add forward", out.to_vector(), want);
}

TEST(BiasAdd, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const auto x = test::convert<double>(test::random_floats(kRows * kCols, 3));
  const auto r = test::convert<double>(test::random_floats(kRows * kCols, 4));
  auto bias = test::convert<double>(test::random_floats(kCols, 5));
  auto loss = [&] {
    std::vector<double> out = x;
    cpu::bias_add_forward<double>(out.data(), bias.data(), kRows, kCols);
    return test::dot(out, r);
  };
  auto want = test::finite_difference_gradient(bias, loss);
  const auto initial = test::convert<double>(test::random_floats(kCols, 6));
  for (int c = 0; c < kCols; ++c) want[c] += initial[c];
  std::vector<double> dbias = initial;
  cpu::bias_add_backward<double>(dbias.data(), r.data(), kRows, kCols);
  test::expect_close("bias_add dbias (accumulated) vs finite differences", dbias, want, 1e-8, 1e-7);
}

TEST(BiasAdd, FloatOpMatchesDoubleTemplate) {
  const int rows = 37, cols = 131;  // more than one column block
  const auto xf = test::random_floats(rows * cols, 7), biasf = test::random_floats(cols, 8);
  const auto doutf = test::random_floats(rows * cols, 9);
  auto x = test::convert<double>(xf);
  const auto bias = test::convert<double>(biasf), dout = test::convert<double>(doutf);
  std::vector<double> dbias(cols, 0.5);
  cpu::bias_add_forward<double>(x.data(), bias.data(), rows, cols);
  cpu::bias_add_backward<double>(dbias.data(), dout.data(), rows, cols);

  Tensor out = Tensor::from_vector(xf, {rows, cols});
  bias_add_forward(out, Tensor::from_vector(biasf, {cols}));
  Tensor dbiast = Tensor::full({cols}, 0.5f);
  bias_add_backward(dbiast, Tensor::from_vector(doutf, {rows, cols}));
  test::expect_close("bias_add f32 forward", out.to_vector(), x, 1e-6, 1e-6);
  test::expect_close("bias_add f32 dbias", dbiast.to_vector(), dbias, 1e-5, 1e-5);
}

}  // namespace
}  // namespace ternion
