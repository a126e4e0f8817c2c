// LayerNorm on the GPU against the CPU op: forward and backward, F32 tightly and BF16 to its
// rounding, dweight/dbias accumulating and bit-for-bit reproducible, dx in place, and the
// backward with a residual gradient bit for bit the GPU's backward + accumulate.
#include "gpu_test_util.h"
#include "kernels/elementwise.h"
#include "kernels/layer_norm.h"

namespace ternion::test {
namespace {

struct LayerNormCase {
  std::int64_t rows, cols;
};

// rows not a multiple of the 8 rows per block, cols not a multiple of the 32 lanes. 771
// columns take one element at a time (and the backward's two-kernel path); 64, 40, 768 and
// 1000 the vector path and the one-pass backward with 1, 1, 3 and 4 packs of 256 columns per
// warp (1000: the last pack partly past the row); 1536 the vector path with the two-kernel
// backward (over 1024 columns). 5000 rows are cut into many row chunks for the parameter
// gradients; 3 rows leave most of a block's warps without a row.
const LayerNormCase kCases[] = {{67, 771}, {5000, 64}, {3, 40}, {300, 768}, {37, 1000}, {20, 1536}};

struct CpuReference {
  Tensor out, mean, rstd, dx, dweight, dbias;
};

// The CPU op on CPU tensors (of any dtype it takes), dweight and dbias starting at their inputs.
CpuReference cpu_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& dout, const Tensor& dweight0, const Tensor& dbias0) {
  const std::int64_t rows = x.size(0);
  CpuReference r{Tensor::empty(x.shape(), x.dtype()), Tensor::empty({rows}), Tensor::empty({rows}),
                 Tensor::empty(x.shape(), x.dtype()), dweight0.clone(), dbias0.clone()};
  layer_norm_forward(r.out, r.mean, r.rstd, x, weight, bias);
  layer_norm_backward(r.dx, r.dweight, r.dbias, dout, x, weight, r.mean, r.rstd);
  return r;
}

TEST(GpuLayerNorm, F32MatchesCpu) {
  TN_REQUIRE_GPU();
  for (const auto& [rows, cols] : kCases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols));
    const Tensor x = random_tensor({rows, cols}, 1, -2.0f, 3.0f);
    const Tensor weight = random_tensor({cols}, 2, 0.5f, 1.5f), bias = random_tensor({cols}, 3);
    const Tensor dout = random_tensor({rows, cols}, 4);
    const Tensor dweight0 = random_tensor({cols}, 5), dbias0 = random_tensor({cols}, 6);
    const CpuReference want = cpu_layer_norm(x, weight, bias, dout, dweight0, dbias0);

    const Tensor gx = to_gpu(x), gweight = to_gpu(weight), gbias = to_gpu(bias);
    Tensor out = Tensor::empty({rows, cols}, DType::F32, gpu());
    Tensor mean = Tensor::empty({rows}, DType::F32, gpu());
    Tensor rstd = Tensor::empty({rows}, DType::F32, gpu());
    layer_norm_forward(out, mean, rstd, gx, gweight, gbias);
    expect_close("layer_norm out", to_host_floats(out), want.out.to_vector(), 1e-5, 1e-5);
    expect_close("layer_norm mean", to_host_floats(mean), want.mean.to_vector(), 1e-6, 1e-5);
    expect_close("layer_norm rstd", to_host_floats(rstd), want.rstd.to_vector(), 1e-6, 1e-5);

    // Backward from the CPU's statistics, so only the backward's own sums differ.
    const Tensor gmean = to_gpu(want.mean), grstd = to_gpu(want.rstd), gdout = to_gpu(dout);
    Tensor dx = Tensor::empty({rows, cols}, DType::F32, gpu());
    Tensor dweight = to_gpu(dweight0), dbias = to_gpu(dbias0);
    layer_norm_backward(dx, dweight, dbias, gdout, gx, gweight, gmean, grstd);
    expect_close("layer_norm dx", to_host_floats(dx), want.dx.to_vector(), 1e-5, 1e-4);
    // Column sums over `rows` terms of size ~1, added in another order than the CPU's.
    const double sum_atol = 1e-6 * static_cast<double>(rows);
    expect_close("layer_norm dweight (accumulated)", to_host_floats(dweight),
                 want.dweight.to_vector(), sum_atol, 1e-5);
    expect_close("layer_norm dbias (accumulated)", to_host_floats(dbias), want.dbias.to_vector(),
                 sum_atol, 1e-5);

    // Deterministic: a second run from the same start gives the same bits.
    Tensor dx2 = Tensor::empty({rows, cols}, DType::F32, gpu());
    Tensor dweight2 = to_gpu(dweight0), dbias2 = to_gpu(dbias0);
    layer_norm_backward(dx2, dweight2, dbias2, gdout, gx, gweight, gmean, grstd);
    expect_bitwise_equal("layer_norm dweight, two runs", to_host_floats(dweight2),
                         to_host_floats(dweight));
    expect_bitwise_equal("layer_norm dbias, two runs", to_host_floats(dbias2),
                         to_host_floats(dbias));
    expect_bitwise_equal("layer_norm dx, two runs", to_host_floats(dx2), to_host_floats(dx));

    // dx in place of dout.
    Tensor in_place = to_gpu(dout);
    Tensor dweight3 = to_gpu(dweight0), dbias3 = to_gpu(dbias0);
    layer_norm_backward(in_place, dweight3, dbias3, in_place, gx, gweight, gmean, grstd);
    expect_bitwise_equal("layer_norm dx in place", to_host_floats(in_place), to_host_floats(dx));
    expect_bitwise_equal("layer_norm dweight with dx in place", to_host_floats(dweight3),
                         to_host_floats(dweight));
  }
}

TEST(GpuLayerNorm, Bf16MatchesCpuToBf16Rounding) {
  TN_REQUIRE_GPU();
  for (const auto& [rows, cols] : kCases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols));
    const Tensor x = round_to_bf16(random_tensor({rows, cols}, 11, -2.0f, 3.0f));
    const Tensor weight = round_to_bf16(random_tensor({cols}, 12, 0.5f, 1.5f));
    const Tensor bias = round_to_bf16(random_tensor({cols}, 13));
    const Tensor dout = round_to_bf16(random_tensor({rows, cols}, 14));
    const Tensor dweight0 = random_tensor({cols}, 15), dbias0 = random_tensor({cols}, 16);
    // The reference: F32 on the bf16 values (the GPU rounds only its bf16 outputs).
    const CpuReference want = cpu_layer_norm(x, weight, bias, dout, dweight0, dbias0);

    const Tensor gx = to_gpu(x, DType::BF16), gweight = to_gpu(weight, DType::BF16),
                 gbias = to_gpu(bias, DType::BF16), gdout = to_gpu(dout, DType::BF16);
    Tensor out = Tensor::empty({rows, cols}, DType::BF16, gpu());
    Tensor mean = Tensor::empty({rows}, DType::F32, gpu());
    Tensor rstd = Tensor::empty({rows}, DType::F32, gpu());
    layer_norm_forward(out, mean, rstd, gx, gweight, gbias);
    expect_close("bf16 layer_norm out", to_host_floats(out), want.out.to_vector(), 1e-2, 1e-2);
    expect_close("bf16 layer_norm mean (f32)", to_host_floats(mean), want.mean.to_vector(), 1e-6,
                 1e-5);
    expect_close("bf16 layer_norm rstd (f32)", to_host_floats(rstd), want.rstd.to_vector(), 1e-6,
                 1e-5);

    Tensor dx = Tensor::empty({rows, cols}, DType::BF16, gpu());
    Tensor dweight = to_gpu(dweight0), dbias = to_gpu(dbias0);
    layer_norm_backward(dx, dweight, dbias, gdout, gx, gweight, to_gpu(want.mean),
                        to_gpu(want.rstd));
    expect_close("bf16 layer_norm dx", to_host_floats(dx), want.dx.to_vector(), 1e-2, 1e-2);
    // dweight and dbias stay F32: only the order of summation differs from the CPU.
    const double sum_atol = 1e-6 * static_cast<double>(rows);
    expect_close("bf16 layer_norm dweight (f32)", to_host_floats(dweight),
                 want.dweight.to_vector(), sum_atol, 1e-5);
    expect_close("bf16 layer_norm dbias (f32)", to_host_floats(dbias), want.dbias.to_vector(),
                 sum_atol, 1e-5);
  }
}

// As the CPU op: a constant row's mean is corrected for its rounding, so it normalises to 0 and
// the output is the bias exactly (a large value's rounded mean would leave a variance of its
// own). 768 columns take the vector path, 771 one element at a time.
TEST(GpuLayerNorm, ConstantRowsNormaliseToTheBias) {
  TN_REQUIRE_GPU();
  const std::vector<float> values = {150.3f, 1234.567f, 12345.678f, 1234567.1f, -3.7f};
  const auto rows = static_cast<std::int64_t>(values.size());
  const float eps = 1e-5f;
  for (const std::int64_t cols : {768, 771}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    std::vector<float> x, bias(cols);
    for (const float v : values) x.insert(x.end(), cols, v);
    for (std::int64_t c = 0; c < cols; ++c) bias[c] = 0.01f * static_cast<float>(c % 7);
    const Tensor gx = to_gpu(Tensor::from_vector(x, {rows, cols}));
    const Tensor gweight = to_gpu(Tensor::full({cols}, 1.5f));
    const Tensor gbias = to_gpu(Tensor::from_vector(bias, {cols}));
    Tensor out = Tensor::empty({rows, cols}, DType::F32, gpu());
    Tensor mean = Tensor::empty({rows}, DType::F32, gpu());
    Tensor rstd = Tensor::empty({rows}, DType::F32, gpu());
    layer_norm_forward(out, mean, rstd, gx, gweight, gbias, eps);
    const std::vector<float> got = to_host_floats(out), got_mean = to_host_floats(mean);
    const std::vector<float> got_rstd = to_host_floats(rstd);
    for (std::int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got_mean[r], values[r]) << "row " << r;
      EXPECT_FLOAT_EQ(got_rstd[r], 1.0f / std::sqrt(eps)) << "row " << r;
      for (std::int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(got[r * cols + c], bias[c]) << r << ", " << c;
    }
  }
}

TEST(GpuLayerNorm, ResidualGradientIsBackwardThenAccumulate) {
  TN_REQUIRE_GPU();
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const auto& [rows, cols] : kCases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", rows " + std::to_string(rows) +
                   ", cols " + std::to_string(cols));
      const Tensor gx = to_gpu(random_tensor({rows, cols}, 21, -2.0f, 3.0f), dtype);
      const Tensor gweight = to_gpu(random_tensor({cols}, 22, 0.5f, 1.5f), dtype);
      const Tensor gdout = to_gpu(random_tensor({rows, cols}, 23), dtype);
      const Tensor gresidual = to_gpu(random_tensor({rows, cols}, 24), dtype);
      const Tensor gmean = to_gpu(random_tensor({rows}, 25, -0.5f, 0.5f));
      const Tensor grstd = to_gpu(random_tensor({rows}, 26, 0.5f, 2.0f));

      Tensor want = Tensor::empty({rows, cols}, dtype, gpu());
      Tensor want_dweight = Tensor::zeros({cols}, DType::F32, gpu());
      Tensor want_dbias = Tensor::zeros({cols}, DType::F32, gpu());
      layer_norm_backward(want, want_dweight, want_dbias, gdout, gx, gweight, gmean, grstd);
      accumulate(want, gresidual);
      Tensor got = to_gpu(Tensor::full({rows, cols}, NAN), dtype);  // every element written
      Tensor dweight = Tensor::zeros({cols}, DType::F32, gpu());
      Tensor dbias = Tensor::zeros({cols}, DType::F32, gpu());
      layer_norm_backward(got, dweight, dbias, gdout, gx, gweight, gmean, grstd, &gresidual);
      expect_bitwise_equal("dx + residual", to_host_floats(got), to_host_floats(want));
      expect_bitwise_equal("dweight", to_host_floats(dweight), to_host_floats(want_dweight));
      expect_bitwise_equal("dbias", to_host_floats(dbias), to_host_floats(want_dbias));
    }
  }
}

}  // namespace
}  // namespace ternion::test
