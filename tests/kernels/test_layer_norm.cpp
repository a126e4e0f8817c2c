// LayerNorm: forward against a naive normalisation, every gradient (dx, dweight, dbias)
// against finite differences, the f32 op against the f64 template, the backward with a
// residual gradient against backward + accumulate.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/elementwise.h"
#include "kernels/layer_norm.h"
#include "tests/kernels/bf16_test_util.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kRows = 21, kCols = 10;  // B=3, T=7, C=10
constexpr double kEps = 1e-5;

struct LayerNormInputs {
  std::vector<double> x, weight, bias;
};

LayerNormInputs random_inputs(int rows, int cols, std::uint64_t seed) {
  // An offset and a scale per row, so that the mean and variance matter; values stay floats so
  // that the f32 and f64 paths see the same inputs.
  auto x = test::convert<double>(test::random_floats(static_cast<std::size_t>(rows * cols), seed));
  const auto shift = test::random_floats(static_cast<std::size_t>(rows), seed + 1, -2.0f, 2.0f);
  const auto spread = test::random_floats(static_cast<std::size_t>(rows), seed + 2, 0.5f, 3.0f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      x[r * cols + c] = static_cast<float>(x[r * cols + c] * spread[r] + shift[r]);
  return {x,
          test::convert<double>(
              test::random_floats(static_cast<std::size_t>(cols), seed + 3, 0.5f, 1.5f)),
          test::convert<double>(test::random_floats(static_cast<std::size_t>(cols), seed + 4))};
}

TEST(LayerNorm, ForwardMatchesNaive) {
  const LayerNormInputs in = random_inputs(kRows, kCols, 1);
  std::vector<double> out(in.x.size()), mean(kRows), rstd(kRows);
  cpu::layer_norm_forward<double>(out.data(), mean.data(), rstd.data(), in.x.data(),
                                  in.weight.data(), in.bias.data(), kRows, kCols, kEps);
  std::vector<double> want(in.x.size()), want_mean(kRows), want_rstd(kRows);
  for (int r = 0; r < kRows; ++r) {
    double mu = 0, var = 0;
    for (int c = 0; c < kCols; ++c) mu += in.x[r * kCols + c] / kCols;
    for (int c = 0; c < kCols; ++c) var += std::pow(in.x[r * kCols + c] - mu, 2) / kCols;
    want_mean[r] = mu;
    want_rstd[r] = 1 / std::sqrt(var + kEps);
    for (int c = 0; c < kCols; ++c)
      want[r * kCols + c] = (in.x[r * kCols + c] - mu) * want_rstd[r] * in.weight[c] + in.bias[c];
  }
  test::expect_close("layer_norm out", out, want, 1e-12, 1e-12);
  test::expect_close("layer_norm mean", mean, want_mean, 1e-12, 1e-12);
  test::expect_close("layer_norm rstd", rstd, want_rstd, 1e-12, 1e-12);
}

// A constant row has no variance: it normalises to the bias, at rstd 1/sqrt(eps), however its
// value rounds in the mean (a float mean off by an ulp used to read as a variance of its own
// and normalise the row to about +-1).
TEST(LayerNorm, ConstantRowsNormaliseToTheBias) {
  const int cols = 768;
  const std::vector<float> values = {150.3f, 1234.567f, 12345.678f, 1234567.1f, -3.7f};
  std::vector<float> x, weight(cols, 1.5f), bias(cols);
  for (float v : values) x.insert(x.end(), cols, v);
  for (int c = 0; c < cols; ++c) bias[c] = 0.01f * static_cast<float>(c % 7);
  const int rows = static_cast<int>(values.size());
  std::vector<float> out(x.size()), mean(rows), rstd(rows);
  const float eps = 1e-5f;
  cpu::layer_norm_forward<float>(out.data(), mean.data(), rstd.data(), x.data(), weight.data(),
                                 bias.data(), rows, cols, eps);
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(mean[r], values[r]) << "row " << r;
    EXPECT_FLOAT_EQ(rstd[r], 1.0f / std::sqrt(eps)) << "row " << r;
    for (int c = 0; c < cols; ++c) ASSERT_EQ(out[r * cols + c], bias[c]) << r << ", " << c;
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  LayerNormInputs in = random_inputs(kRows, kCols, 2);
  const auto r = test::convert<double>(test::random_floats(in.x.size(), 10));
  std::vector<double> out(in.x.size()), mean(kRows), rstd(kRows);
  auto forward = [&] {
    cpu::layer_norm_forward<double>(out.data(), mean.data(), rstd.data(), in.x.data(),
                                    in.weight.data(), in.bias.data(), kRows, kCols, kEps);
    return test::dot(out, r);
  };
  const auto want_dx = test::finite_difference_gradient(in.x, forward);
  auto want_dweight = test::finite_difference_gradient(in.weight, forward);
  auto want_dbias = test::finite_difference_gradient(in.bias, forward);

  forward();  // mean and rstd of the unperturbed x
  // dx overwrites (start from NaN); dweight and dbias accumulate (start from known values).
  std::vector<double> dx(in.x.size(), NAN), dweight(kCols, 0.25), dbias(kCols, -0.5);
  for (double& g : want_dweight) g += 0.25;
  for (double& g : want_dbias) g -= 0.5;
  cpu::layer_norm_backward<double>(dx.data(), dweight.data(), dbias.data(), r.data(), in.x.data(),
                                   in.weight.data(), mean.data(), rstd.data(), kRows, kCols);
  test::expect_close("layer_norm dx vs finite differences", dx, want_dx, 1e-8, 1e-6);
  test::expect_close("layer_norm dweight vs finite differences", dweight, want_dweight, 1e-8, 1e-6);
  test::expect_close("layer_norm dbias vs finite differences", dbias, want_dbias, 1e-8, 1e-6);
}

TEST(LayerNorm, FloatOpMatchesDoubleTemplate) {
  const int rows = 29, cols = 133;  // more than one column block, not a multiple of 8
  const LayerNormInputs in = random_inputs(rows, cols, 3);
  const auto dout = test::convert<double>(test::random_floats(in.x.size(), 11));
  std::vector<double> out(in.x.size()), mean(rows), rstd(rows);
  cpu::layer_norm_forward<double>(out.data(), mean.data(), rstd.data(), in.x.data(),
                                  in.weight.data(), in.bias.data(), rows, cols, kEps);
  std::vector<double> dx(in.x.size()), dweight(cols, 0.0), dbias(cols, 0.0);
  cpu::layer_norm_backward<double>(dx.data(), dweight.data(), dbias.data(), dout.data(),
                                   in.x.data(), in.weight.data(), mean.data(), rstd.data(), rows,
                                   cols);

  Tensor x = Tensor::from_vector(test::convert<float>(in.x), {rows, cols});
  Tensor weight = Tensor::from_vector(test::convert<float>(in.weight), {cols});
  Tensor bias = Tensor::from_vector(test::convert<float>(in.bias), {cols});
  Tensor outt = Tensor::empty({rows, cols}), meant = Tensor::empty({rows}),
         rstdt = Tensor::empty({rows});
  layer_norm_forward(outt, meant, rstdt, x, weight, bias, static_cast<float>(kEps));
  Tensor dxt = Tensor::empty({rows, cols}), dweightt = Tensor::zeros({cols}),
         dbiast = Tensor::zeros({cols});
  layer_norm_backward(dxt, dweightt, dbiast,
                      Tensor::from_vector(test::convert<float>(dout), {rows, cols}), x, weight,
                      meant, rstdt);
  test::expect_close("layer_norm f32 out", outt.to_vector(), out, 1e-5, 1e-5);
  test::expect_close("layer_norm f32 mean", meant.to_vector(), mean, 1e-6, 1e-6);
  test::expect_close("layer_norm f32 rstd", rstdt.to_vector(), rstd, 1e-6, 1e-5);
  test::expect_close("layer_norm f32 dx", dxt.to_vector(), dx, 1e-5, 1e-4);
  test::expect_close("layer_norm f32 dweight", dweightt.to_vector(), dweight, 1e-5, 1e-5);
  test::expect_close("layer_norm f32 dbias", dbiast.to_vector(), dbias, 1e-5, 1e-5);
}

}  // namespace
TEST(LayerNorm, ResidualGradientIsBackwardThenAccumulate) {
  const int rows = 13, cols = 40;
  const LayerNormInputs in = random_inputs(rows, cols, 5);
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto as_dtype = [&](const Tensor& f32) {
      return dtype == DType::BF16 ? test::to_bf16(f32) : f32;
    };
    const Tensor x = as_dtype(Tensor::from_vector(test::convert<float>(in.x), {rows, cols}));
    const Tensor weight =
        as_dtype(Tensor::from_vector(test::convert<float>(in.weight), {cols}));
    const Tensor bias = as_dtype(Tensor::from_vector(test::convert<float>(in.bias), {cols}));
    const Tensor dout =
        as_dtype(Tensor::from_vector(test::random_floats(rows * cols, 21), {rows, cols}));
    const Tensor residual =
        as_dtype(Tensor::from_vector(test::random_floats(rows * cols, 22), {rows, cols}));
    Tensor out = Tensor::empty({rows, cols}, dtype), mean = Tensor::empty({rows}),
           rstd = Tensor::empty({rows});
    layer_norm_forward(out, mean, rstd, x, weight, bias);

    Tensor want = Tensor::empty({rows, cols}, dtype);
    Tensor want_dweight = Tensor::zeros({cols}), want_dbias = Tensor::zeros({cols});
    layer_norm_backward(want, want_dweight, want_dbias, dout, x, weight, mean, rstd);
    accumulate(want, residual);
    Tensor got = Tensor::empty({rows, cols}, dtype);
    Tensor dweight = Tensor::zeros({cols}), dbias = Tensor::zeros({cols});
    layer_norm_backward(got, dweight, dbias, dout, x, weight, mean, rstd, &residual);
    test::expect_bitwise_equal("dx + residual", as_f32(got).to_vector(),
                               as_f32(want).to_vector());
    test::expect_bitwise_equal("dweight", dweight.to_vector(), want_dweight.to_vector());
    test::expect_bitwise_equal("dbias", dbias.to_vector(), want_dbias.to_vector());
    // The residual cannot be dx itself: dx is written before the residual would be read.
    EXPECT_THROW(layer_norm_backward(got, dweight, dbias, dout, x, weight, mean, rstd, &got),
                 InternalError);
  }
}

}  // namespace ternion
