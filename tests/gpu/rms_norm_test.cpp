// RMSNorm on the GPU against the CPU op: forward and backward, F32 tightly and BF16 to its
// rounding, dweight accumulating and bit-for-bit reproducible, dx in place, and the backward
// with a residual gradient bit for bit the GPU's backward + accumulate.
#include "gpu_test_util.h"
#include "kernels/elementwise.h"
#include "kernels/rms_norm.h"

namespace ternion::test {
namespace {

struct RmsNormCase {
  std::int64_t rows, cols;
};

// rows not a multiple of the 8 rows per block, cols not a multiple of the 32 lanes. 771 and 10
// columns take one element at a time; 64, 40, 768, 1000 and 1536 the vector path (1000: a
// lane's last 8 columns past the row). 5000 rows are cut into many row chunks for the weight
// gradient; 3 rows leave most of a block's warps without a row.
const RmsNormCase kCases[] = {{67, 771}, {21, 10},   {5000, 64}, {3, 40},
                              {300, 768}, {37, 1000}, {20, 1536}};
constexpr float kEps = 1e-5f;

struct CpuReference {
  Tensor out, rstd, dx, dweight;
};

// The CPU op on CPU tensors (of any dtype it takes), dweight starting at dweight0.
CpuReference cpu_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& dout,
                          const Tensor& dweight0) {
  const std::int64_t rows = x.size(0);
  CpuReference r{Tensor::empty(x.shape(), x.dtype()), Tensor::empty({rows}),
                 Tensor::empty(x.shape(), x.dtype()), dweight0.clone()};
  rms_norm_forward(r.out, r.rstd, x, weight, kEps);
  rms_norm_backward(r.dx, r.dweight, dout, x, weight, r.rstd);
  return r;
}

// A CPU tensor of `f32`'s values in `dtype`.
Tensor on_cpu_as(const Tensor& f32, DType dtype) {
  if (dtype == DType::F32) return f32.clone();
  Tensor t = Tensor::empty(f32.shape(), dtype);
  convert(t, f32);
  return t;
}

TEST(GpuRmsNorm, F32MatchesCpu) {
  TN_REQUIRE_GPU();
  for (const auto& [rows, cols] : kCases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols));
    const Tensor x = random_tensor({rows, cols}, 1, -2.0f, 3.0f);
    const Tensor weight = random_tensor({cols}, 2, 0.5f, 1.5f);
    const Tensor dout = random_tensor({rows, cols}, 4), dweight0 = random_tensor({cols}, 5);
    const CpuReference want = cpu_rms_norm(x, weight, dout, dweight0);

    const Tensor gx = to_gpu(x), gweight = to_gpu(weight);
    Tensor out = Tensor::empty({rows, cols}, DType::F32, gpu());
    Tensor rstd = Tensor::empty({rows}, DType::F32, gpu());
    rms_norm_forward(out, rstd, gx, gweight, kEps);
    expect_close("rms_norm out", to_host_floats(out), want.out.to_vector(), 1e-5, 1e-5);
    expect_close("rms_norm rstd", to_host_floats(rstd), want.rstd.to_vector(), 1e-6, 1e-5);

    // Backward from the CPU's rstd, so only the backward's own sums differ.
    const Tensor grstd = to_gpu(want.rstd), gdout = to_gpu(dout);
    Tensor dx = Tensor::empty({rows, cols}, DType::F32, gpu());
    Tensor dweight = to_gpu(dweight0);
    rms_norm_backward(dx, dweight, gdout, gx, gweight, grstd);
    expect_close("rms_norm dx", to_host_floats(dx), want.dx.to_vector(), 1e-5, 1e-4);
    // Column sums over `rows` terms of size ~1, added in another order than the CPU's.
    const double sum_atol = 1e-6 * static_cast<double>(rows);
    expect_close("rms_norm dweight (accumulated)", to_host_floats(dweight),
                 want.dweight.to_vector(), sum_atol, 1e-5);

    // Deterministic: a second run from the same start gives the same bits.
    Tensor dx2 = Tensor::empty({rows, cols}, DType::F32, gpu());
    Tensor dweight2 = to_gpu(dweight0);
    rms_norm_backward(dx2, dweight2, gdout, gx, gweight, grstd);
    expect_bitwise_equal("rms_norm dweight, two runs", to_host_floats(dweight2),
                         to_host_floats(dweight));
    expect_bitwise_equal("rms_norm dx, two runs", to_host_floats(dx2), to_host_floats(dx));

    // dx in place of dout.
    Tensor in_place = to_gpu(dout);
    Tensor dweight3 = to_gpu(dweight0);
    rms_norm_backward(in_place, dweight3, in_place, gx, gweight, grstd);
    expect_bitwise_equal("rms_norm dx in place", to_host_floats(in_place), to_host_floats(dx));
    expect_bitwise_equal("rms_norm dweight with dx in place", to_host_floats(dweight3),
                         to_host_floats(dweight));
  }
}

TEST(GpuRmsNorm, Bf16MatchesCpuToBf16Rounding) {
  TN_REQUIRE_GPU();
  for (const auto& [rows, cols] : kCases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols));
    const Tensor x = round_to_bf16(random_tensor({rows, cols}, 11, -2.0f, 3.0f));
    const Tensor weight = round_to_bf16(random_tensor({cols}, 12, 0.5f, 1.5f));
    const Tensor dout = round_to_bf16(random_tensor({rows, cols}, 14));
    const Tensor dweight0 = random_tensor({cols}, 15);
    // The reference: the CPU op on bf16 tensors (F32 math on the bf16 values, rounded once).
    const CpuReference want = cpu_rms_norm(on_cpu_as(x, DType::BF16),
                                           on_cpu_as(weight, DType::BF16),
                                           on_cpu_as(dout, DType::BF16), dweight0);

    const Tensor gx = to_gpu(x, DType::BF16), gweight = to_gpu(weight, DType::BF16),
                 gdout = to_gpu(dout, DType::BF16);
    Tensor out = Tensor::empty({rows, cols}, DType::BF16, gpu());
    Tensor rstd = Tensor::empty({rows}, DType::F32, gpu());
    rms_norm_forward(out, rstd, gx, gweight, kEps);
    // One bf16 ulp (at most 2^-7 relative) where the F32 values straddle a rounding boundary.
    expect_close("bf16 rms_norm out", to_host_floats(out), as_f32(want.out).to_vector(), 1e-6,
                 1e-2);
    expect_close("bf16 rms_norm rstd (f32)", to_host_floats(rstd), want.rstd.to_vector(), 1e-6,
                 1e-5);

    Tensor dx = Tensor::empty({rows, cols}, DType::BF16, gpu());
    Tensor dweight = to_gpu(dweight0);
    rms_norm_backward(dx, dweight, gdout, gx, gweight, to_gpu(want.rstd));
    // dx is a difference of two terms: an ulp of the larger, so an absolute tolerance too.
    expect_close("bf16 rms_norm dx", to_host_floats(dx), as_f32(want.dx).to_vector(), 1e-2, 1e-2);
    // dweight stays F32: only the order of summation differs from the CPU.
    const double sum_atol = 1e-6 * static_cast<double>(rows);
    expect_close("bf16 rms_norm dweight (f32)", to_host_floats(dweight),
                 want.dweight.to_vector(), sum_atol, 1e-5);
  }
}

TEST(GpuRmsNorm, ResidualGradientIsBackwardThenAccumulate) {
  TN_REQUIRE_GPU();
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const auto& [rows, cols] : kCases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", rows " + std::to_string(rows) +
                   ", cols " + std::to_string(cols));
      const Tensor gx = to_gpu(random_tensor({rows, cols}, 21, -2.0f, 3.0f), dtype);
      const Tensor gweight = to_gpu(random_tensor({cols}, 22, 0.5f, 1.5f), dtype);
      const Tensor gdout = to_gpu(random_tensor({rows, cols}, 23), dtype);
      const Tensor gresidual = to_gpu(random_tensor({rows, cols}, 24), dtype);
      const Tensor grstd = to_gpu(random_tensor({rows}, 26, 0.5f, 2.0f));

      Tensor want = Tensor::empty({rows, cols}, dtype, gpu());
      Tensor want_dweight = Tensor::zeros({cols}, DType::F32, gpu());
      rms_norm_backward(want, want_dweight, gdout, gx, gweight, grstd);
      accumulate(want, gresidual);
      Tensor got = to_gpu(Tensor::full({rows, cols}, NAN), dtype);  // every element written
      Tensor dweight = Tensor::zeros({cols}, DType::F32, gpu());
      rms_norm_backward(got, dweight, gdout, gx, gweight, grstd, &gresidual);
      expect_bitwise_equal("dx + residual", to_host_floats(got), to_host_floats(want));
      expect_bitwise_equal("dweight", to_host_floats(dweight), to_host_floats(want_dweight));
    }
  }
}

// A view one element into its storage cannot take 16-byte access: x at an odd offset, with a
// row length (64) that would otherwise take the vector path, gives the aligned copy's results.
TEST(GpuRmsNorm, UnalignedViewsTakeTheScalarPath) {
  TN_REQUIRE_GPU();
  const std::int64_t rows = 32, cols = 64;
  const Tensor values = random_tensor({rows * cols + 1}, 7, -2.0f, 3.0f);
  const Tensor weight = random_tensor({cols}, 8, 0.5f, 1.5f), dout = random_tensor({rows, cols}, 9);
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor unaligned = to_gpu(values, dtype).slice(0, 1, rows * cols).view({rows, cols});
    const Tensor aligned = unaligned.clone();
    const Tensor gweight = to_gpu(weight, dtype), gdout = to_gpu(dout, dtype);
    const double rtol = dtype == DType::BF16 ? 1e-2 : 1e-6;
    Tensor out1 = Tensor::empty({rows, cols}, dtype, gpu());
    Tensor out8 = Tensor::empty({rows, cols}, dtype, gpu());
    Tensor rstd1 = Tensor::empty({rows}, DType::F32, gpu());
    Tensor rstd8 = Tensor::empty({rows}, DType::F32, gpu());
    rms_norm_forward(out1, rstd1, unaligned, gweight, kEps);
    rms_norm_forward(out8, rstd8, aligned, gweight, kEps);
    expect_close("rms_norm out, unaligned vs aligned", to_host_floats(out1), to_host_floats(out8),
                 1e-6, rtol);
    expect_close("rms_norm rstd, unaligned vs aligned", to_host_floats(rstd1),
                 to_host_floats(rstd8), 1e-7, 1e-6);
    Tensor dx1 = Tensor::empty({rows, cols}, dtype, gpu());
    Tensor dx8 = Tensor::empty({rows, cols}, dtype, gpu());
    Tensor dweight1 = Tensor::zeros({cols}, DType::F32, gpu());
    Tensor dweight8 = Tensor::zeros({cols}, DType::F32, gpu());
    rms_norm_backward(dx1, dweight1, gdout, unaligned, gweight, rstd8);
    rms_norm_backward(dx8, dweight8, gdout, aligned, gweight, rstd8);
    expect_close("rms_norm dx, unaligned vs aligned", to_host_floats(dx1), to_host_floats(dx8),
                 1e-6, rtol);
    expect_close("rms_norm dweight, unaligned vs aligned", to_host_floats(dweight1),
                 to_host_floats(dweight8), 1e-5, 1e-5);
  }
}

}  // namespace
}  // namespace ternion::test
