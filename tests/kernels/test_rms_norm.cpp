// RMSNorm: forward against a naive normalisation, dx and dweight against finite differences,
// the f32 op against the f64 template, the backward with a residual gradient against backward +
// accumulate, dx in place of dout, bf16 staging (exactly the f32 op on rounded inputs), the same
// bits whatever the thread count, and the operands it refuses.
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/elementwise.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/bf16_test_util.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kRows = 21, kCols = 10;  // B=3, T=7, C=10
constexpr double kEps = 1e-5;

struct RmsNormInputs {
  std::vector<double> x, weight;
};

RmsNormInputs random_inputs(int rows, int cols, std::uint64_t seed) {
  // A scale per row, so that the root mean square matters; values stay floats so that the f32
  // and f64 paths see the same inputs.
  auto x = test::convert<double>(test::random_floats(static_cast<std::size_t>(rows * cols), seed));
  const auto spread = test::random_floats(static_cast<std::size_t>(rows), seed + 1, 0.2f, 4.0f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      x[r * cols + c] = static_cast<float>(x[r * cols + c] * spread[r]);
  return {x, test::convert<double>(
                 test::random_floats(static_cast<std::size_t>(cols), seed + 2, 0.5f, 1.5f))};
}

TEST(RmsNorm, ForwardMatchesNaive) {
  const RmsNormInputs in = random_inputs(kRows, kCols, 1);
  std::vector<double> out(in.x.size()), rstd(kRows);
  cpu::rms_norm_forward<double>(out.data(), rstd.data(), in.x.data(), in.weight.data(), kRows,
                                kCols, kEps);
  std::vector<double> want(in.x.size()), want_rstd(kRows);
  for (int r = 0; r < kRows; ++r) {
    double mean_square = 0;
    for (int c = 0; c < kCols; ++c) mean_square += in.x[r * kCols + c] * in.x[r * kCols + c];
    mean_square /= kCols;
    want_rstd[r] = 1 / std::sqrt(mean_square + kEps);
    for (int c = 0; c < kCols; ++c)
      want[r * kCols + c] = in.x[r * kCols + c] / std::sqrt(mean_square + kEps) * in.weight[c];
  }
  test::expect_close("rms_norm out", out, want, 1e-12, 1e-12);
  test::expect_close("rms_norm rstd", rstd, want_rstd, 1e-12, 1e-12);
}

TEST(RmsNorm, EpsGuardsAZeroRow) {
  std::vector<double> x(kCols, 0.0), weight(kCols, 1.0), out(kCols), rstd(1);
  cpu::rms_norm_forward<double>(out.data(), rstd.data(), x.data(), weight.data(), 1, kCols, kEps);
  EXPECT_DOUBLE_EQ(rstd[0], 1 / std::sqrt(kEps));
  test::expect_close("rms_norm of zeros", out, x, 0, 0);
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  RmsNormInputs in = random_inputs(kRows, kCols, 2);
  const auto r = test::convert<double>(test::random_floats(in.x.size(), 10));
  std::vector<double> out(in.x.size()), rstd(kRows);
  auto forward = [&] {
    cpu::rms_norm_forward<double>(out.data(), rstd.data(), in.x.data(), in.weight.data(), kRows,
                                  kCols, kEps);
    return test::dot(out, r);
  };
  const auto want_dx = test::finite_difference_gradient(in.x, forward);
  auto want_dweight = test::finite_difference_gradient(in.weight, forward);

  forward();  // rstd of the unperturbed x
  // dx overwrites (start from NaN); dweight accumulates (start from a known value).
  std::vector<double> dx(in.x.size(), NAN), dweight(kCols, 0.25);
  for (double& g : want_dweight) g += 0.25;
  cpu::rms_norm_backward<double>(dx.data(), dweight.data(), r.data(), in.x.data(),
                                 in.weight.data(), rstd.data(), kRows, kCols);
  test::expect_close("rms_norm dx vs finite differences", dx, want_dx, 1e-8, 1e-6);
  test::expect_close("rms_norm dweight vs finite differences", dweight, want_dweight, 1e-8, 1e-6);
}

TEST(RmsNorm, FloatOpMatchesDoubleTemplate) {
  const int rows = 29, cols = 133;  // more than one column block, not a multiple of 8
  const RmsNormInputs in = random_inputs(rows, cols, 3);
  const auto dout = test::convert<double>(test::random_floats(in.x.size(), 11));
  std::vector<double> out(in.x.size()), rstd(rows);
  cpu::rms_norm_forward<double>(out.data(), rstd.data(), in.x.data(), in.weight.data(), rows,
                                cols, kEps);
  std::vector<double> dx(in.x.size()), dweight(cols, 0.0);
  cpu::rms_norm_backward<double>(dx.data(), dweight.data(), dout.data(), in.x.data(),
                                 in.weight.data(), rstd.data(), rows, cols);

  // A 3-d x: rows are everything but the last dimension.
  Tensor x = Tensor::from_vector(test::convert<float>(in.x), {1, rows, cols});
  Tensor weight = Tensor::from_vector(test::convert<float>(in.weight), {cols});
  Tensor outt = Tensor::empty({1, rows, cols}), rstdt = Tensor::empty({rows});
  rms_norm_forward(outt, rstdt, x, weight, static_cast<float>(kEps));
  Tensor dxt = Tensor::empty({1, rows, cols}), dweightt = Tensor::zeros({cols});
  rms_norm_backward(dxt, dweightt,
                    Tensor::from_vector(test::convert<float>(dout), {1, rows, cols}), x, weight,
                    rstdt);
  test::expect_close("rms_norm f32 out", outt.to_vector(), out, 1e-5, 1e-5);
  test::expect_close("rms_norm f32 rstd", rstdt.to_vector(), rstd, 1e-6, 1e-5);
  test::expect_close("rms_norm f32 dx", dxt.to_vector(), dx, 1e-5, 1e-4);
  test::expect_close("rms_norm f32 dweight", dweightt.to_vector(), dweight, 1e-5, 1e-5);
}

TEST(RmsNorm, ResidualGradientIsBackwardThenAccumulate) {
  const int rows = 13, cols = 40;
  const RmsNormInputs in = random_inputs(rows, cols, 5);
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto as_dtype = [&](const Tensor& f32) {
      return dtype == DType::BF16 ? test::to_bf16(f32) : f32;
    };
    const Tensor x = as_dtype(Tensor::from_vector(test::convert<float>(in.x), {rows, cols}));
    const Tensor weight = as_dtype(Tensor::from_vector(test::convert<float>(in.weight), {cols}));
    const Tensor dout = as_dtype(test::random_f32({rows, cols}, 21));
    const Tensor residual = as_dtype(test::random_f32({rows, cols}, 22));
    Tensor out = Tensor::empty({rows, cols}, dtype), rstd = Tensor::empty({rows});
    rms_norm_forward(out, rstd, x, weight, static_cast<float>(kEps));

    Tensor want = Tensor::empty({rows, cols}, dtype), want_dweight = Tensor::zeros({cols});
    rms_norm_backward(want, want_dweight, dout, x, weight, rstd);
    accumulate(want, residual);
    Tensor got = Tensor::empty({rows, cols}, dtype), dweight = Tensor::zeros({cols});
    rms_norm_backward(got, dweight, dout, x, weight, rstd, &residual);
    test::expect_bitwise_equal("dx + residual", as_f32(got).to_vector(),
                               as_f32(want).to_vector());
    test::expect_bitwise_equal("dweight", dweight.to_vector(), want_dweight.to_vector());
    // The residual cannot be dx itself: dx is written before the residual would be read.
    EXPECT_THROW(rms_norm_backward(got, dweight, dout, x, weight, rstd, &got), InternalError);
  }
}

TEST(RmsNorm, Bf16IsTheF32OpOnRoundedInputs) {
  constexpr int rows = 6, cols = 40;
  using test::rounded;
  using test::to_bf16;
  const Tensor x = test::random_f32({rows, cols}, 31, -2.0f, 3.0f);
  const Tensor weight = test::random_f32({cols}, 32, 0.5f, 1.5f);
  const Tensor dout = test::random_f32({rows, cols}, 33);
  const auto bf16_values = [](const Tensor& t) {
    return as_f32(t.dtype() == DType::BF16 ? t : to_bf16(t)).to_vector();
  };

  // The reference: f32 on the rounded values, its outputs rounded once.
  Tensor want_out = Tensor::empty({rows, cols}), want_rstd = Tensor::empty({rows});
  rms_norm_forward(want_out, want_rstd, rounded(x), rounded(weight), 1e-5f);
  Tensor want_dx = Tensor::empty({rows, cols}), want_dweight = Tensor::full({cols}, 0.25f);
  rms_norm_backward(want_dx, want_dweight, rounded(dout), rounded(x), rounded(weight), want_rstd);

  Tensor out = Tensor::empty({rows, cols}, DType::BF16), rstd = Tensor::empty({rows});
  rms_norm_forward(out, rstd, to_bf16(x), to_bf16(weight), 1e-5f);
  test::expect_bitwise_equal("bf16 rms_norm out", bf16_values(out), bf16_values(want_out));
  test::expect_bitwise_equal("bf16 rms_norm rstd (f32)", rstd.to_vector(), want_rstd.to_vector());
  Tensor dx = Tensor::empty({rows, cols}, DType::BF16), dweight = Tensor::full({cols}, 0.25f);
  rms_norm_backward(dx, dweight, to_bf16(dout), to_bf16(x), to_bf16(weight), rstd);
  test::expect_bitwise_equal("bf16 rms_norm dx", bf16_values(dx), bf16_values(want_dx));
  test::expect_bitwise_equal("bf16 rms_norm dweight (f32, accumulated)", dweight.to_vector(),
                             want_dweight.to_vector());

  // In place (dx aliasing dout) gives the same dx, in bf16 and in f32.
  Tensor dout_in_place = to_bf16(dout), dw2 = Tensor::zeros({cols});
  rms_norm_backward(dout_in_place, dw2, dout_in_place, to_bf16(x), to_bf16(weight), rstd);
  test::expect_bitwise_equal("bf16 rms_norm dx in place", bf16_values(dout_in_place),
                             bf16_values(want_dx));
  Tensor f32_in_place = rounded(dout), dw3 = Tensor::full({cols}, 0.25f);
  rms_norm_backward(f32_in_place, dw3, f32_in_place, rounded(x), rounded(weight), want_rstd);
  test::expect_bitwise_equal("f32 rms_norm dx in place", f32_in_place.to_vector(),
                             want_dx.to_vector());
  test::expect_bitwise_equal("f32 rms_norm dweight with dx in place", dw3.to_vector(),
                             want_dweight.to_vector());
}

TEST(RmsNorm, BitsDoNotDependOnTheThreadCount) {
  constexpr int rows = 200, cols = 300;  // large enough for the parallel paths
  const Tensor x = test::random_f32({rows, cols}, 41), weight = test::random_f32({cols}, 42);
  const Tensor dout = test::random_f32({rows, cols}, 43);
  const int saved = omp_get_max_threads();
  std::vector<float> reference;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Tensor out = Tensor::empty({rows, cols}), rstd = Tensor::empty({rows});
    rms_norm_forward(out, rstd, x, weight, 1e-5f);
    Tensor dx = Tensor::empty({rows, cols}), dweight = Tensor::zeros({cols});
    rms_norm_backward(dx, dweight, dout, x, weight, rstd);
    std::vector<float> all = out.to_vector();
    for (const Tensor* t : {&rstd, &dx, &dweight}) {
      const std::vector<float> values = t->to_vector();
      all.insert(all.end(), values.begin(), values.end());
    }
    if (threads == 1)
      reference = std::move(all);
    else
      test::expect_bitwise_equal("rms_norm with " + std::to_string(threads) + " threads vs 1",
                                 all, reference);
  }
  omp_set_num_threads(saved);
}

TEST(RmsNorm, RefusesMisuse) {
  const Tensor x = Tensor::zeros({5, 4}), weight = Tensor::full({4}, 1.0f);
  Tensor out = Tensor::empty({5, 4}), rstd = Tensor::empty({5});
  EXPECT_NO_THROW(rms_norm_forward(out, rstd, x, weight, 1e-5f));
  EXPECT_THROW(rms_norm_forward(out, rstd, x, Tensor::full({5}, 1.0f), 1e-5f), InternalError)
      << "weight of the wrong width";
  Tensor short_rstd = Tensor::empty({4});
  EXPECT_THROW(rms_norm_forward(out, short_rstd, x, weight, 1e-5f), InternalError)
      << "rstd of the wrong length";
  Tensor wide_out = Tensor::empty({5, 5});
  EXPECT_THROW(rms_norm_forward(wide_out, rstd, x, weight, 1e-5f), InternalError)
      << "out of another shape";
  EXPECT_THROW(rms_norm_forward(out, rstd, test::to_bf16(x), weight, 1e-5f), InternalError)
      << "bf16 x with f32 out and weight";
  Tensor bf16_rstd = Tensor::empty({5}, DType::BF16);
  EXPECT_THROW(rms_norm_forward(out, bf16_rstd, x, weight, 1e-5f), InternalError)
      << "bf16 statistics";
  const Tensor columns = Tensor::zeros({5, 8}).slice(1, 0, 4);  // a strided view
  EXPECT_THROW(rms_norm_forward(out, rstd, columns, weight, 1e-5f), InternalError)
      << "non-contiguous x";

  Tensor dx = Tensor::empty({5, 4}), dweight = Tensor::zeros({4});
  const Tensor dout = Tensor::zeros({5, 4});
  EXPECT_NO_THROW(rms_norm_backward(dx, dweight, dout, x, weight, rstd));
  Tensor bf16_dweight = Tensor::zeros({4}, DType::BF16);
  EXPECT_THROW(rms_norm_backward(dx, bf16_dweight, dout, x, weight, rstd), InternalError)
      << "bf16 weight gradient";
  EXPECT_THROW(rms_norm_backward(dx, dweight, Tensor::zeros({4, 5}), x, weight, rstd),
               InternalError)
      << "dout of another shape";
  const Tensor bf16_residual = test::to_bf16(dout);
  EXPECT_THROW(rms_norm_backward(dx, dweight, dout, x, weight, rstd, &bf16_residual),
               InternalError)
      << "residual in another dtype";
}

}  // namespace
}  // namespace ternion
