// Bias add, GELU (also with the fused bias gradient, against the GPU's unfused ops) and the
// elementwise helpers on the GPU against the CPU ops, F32 and BF16.
// Ops that are one F32 operation and one rounding per element (bias forward, add, accumulate,
// scale) must match the CPU bit for bit; GELU to a few ulps (each compiler fuses multiply-adds
// where it likes); the reductions (dbias, sum_of_squares) to their summation order, and
// bit-for-bit between two GPU runs.
#include <algorithm>
#include <limits>
#include <string>

#include "gpu_test_util.h"
#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"

namespace ternion::test {
namespace {

// A CPU tensor of `f32`'s values in `dtype` (the CPU ops stage BF16 through F32).
Tensor on_cpu_as(const Tensor& f32, DType dtype) {
  if (dtype == DType::F32) return f32.clone();
  Tensor t = Tensor::empty(f32.shape(), dtype);
  convert(t, f32);
  return t;
}

std::vector<float> host_values(const Tensor& cpu_tensor) { return as_f32(cpu_tensor).to_vector(); }

const char* name_of(DType dtype) { return dtype == DType::F32 ? "f32" : "bf16"; }

TEST(GpuBiasAdd, ForwardIsTheCpuOpBitForBit) {
  TN_REQUIRE_GPU();
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor rows = random_tensor({67, 771}, 1), bias = random_tensor({771}, 2);
    Tensor want = on_cpu_as(rows, dtype);
    bias_add_forward(want, on_cpu_as(bias, dtype));
    Tensor out = to_gpu(rows, dtype);
    bias_add_forward(out, to_gpu(bias, dtype));
    expect_bitwise_equal(std::string("bias_add ") + name_of(dtype), to_host_floats(out),
                         host_values(want));
  }
}

TEST(GpuBiasAdd, BackwardAccumulatesColumnSumsDeterministically) {
  TN_REQUIRE_GPU();
  struct Case {
    std::int64_t rows, cols;
  };
  // Many row chunks; columns not a multiple of 32; fewer rows than one chunk.
  for (const auto& [rows, cols] : {Case{5000, 64}, Case{67, 771}, Case{3, 40}}) {
    for (DType dtype : {DType::F32, DType::BF16}) {
      const std::string label = std::string("dbias ") + name_of(dtype) + " [" +
                                std::to_string(rows) + ", " + std::to_string(cols) + "]";
      const Tensor dout = random_tensor({rows, cols}, 3), dbias0 = random_tensor({cols}, 4);
      Tensor want = dbias0.clone();
      bias_add_backward(want, on_cpu_as(dout, dtype));
      const Tensor gdout = to_gpu(dout, dtype);
      Tensor dbias = to_gpu(dbias0);
      bias_add_backward(dbias, gdout);
      expect_close(label, to_host_floats(dbias), want.to_vector(),
                   1e-6 * static_cast<double>(rows), 1e-5);
      Tensor again = to_gpu(dbias0);
      bias_add_backward(again, gdout);
      expect_bitwise_equal(label + ", two runs", to_host_floats(again), to_host_floats(dbias));
    }
  }
}

// Each column sums in the same order whether a thread takes 8 columns (aligned rows) or one
// (a view one element into its storage): the same bits.
TEST(GpuBiasAdd, BackwardBitsDoNotDependOnTheVectorPath) {
  TN_REQUIRE_GPU();
  const std::int64_t rows = 300, cols = 64;
  const Tensor values = random_tensor({rows * cols + 1}, 17), dbias0 = random_tensor({cols}, 18);
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor unaligned = to_gpu(values, dtype).slice(0, 1, rows * cols).view({rows, cols});
    const Tensor aligned = unaligned.clone();
    Tensor one_at_a_time = to_gpu(dbias0), eight_at_a_time = to_gpu(dbias0);
    bias_add_backward(one_at_a_time, unaligned);
    bias_add_backward(eight_at_a_time, aligned);
    expect_bitwise_equal(std::string("dbias ") + name_of(dtype), to_host_floats(one_at_a_time),
                         to_host_floats(eight_at_a_time));
  }
}

TEST(GpuGelu, ForwardAndBackwardMatchCpu) {
  TN_REQUIRE_GPU();
  // [256, 96] takes the vector path, [333, 129] the one-element path.
  for (const Shape& shape : {Shape{256, 96}, Shape{333, 129}}) {
    SCOPED_TRACE(shape_str(shape));
    const Tensor x = random_tensor(shape, 5, -6.0f, 6.0f), dout = random_tensor(shape, 6);
    for (DType dtype : {DType::F32, DType::BF16}) {
      const std::string name = name_of(dtype);
      // F32: a few ulps (fused multiply-adds differ). BF16: the same F32 math rounded once, so at
      // most one bf16 ulp (2^-8 relative) apart where the F32 values straddle a rounding boundary.
      const double atol = 1e-6;
      const double rtol = dtype == DType::F32 ? 1e-5 : 1e-2;
      const Tensor cx = on_cpu_as(x, dtype), cdout = on_cpu_as(dout, dtype);
      Tensor want = Tensor::empty(shape, dtype), want_dx = Tensor::empty(shape, dtype);
      gelu_forward(want, cx);
      gelu_backward(want_dx, cx, cdout);

      const Tensor gx = to_gpu(x, dtype), gdout = to_gpu(dout, dtype);
      Tensor out = Tensor::empty(shape, dtype, gpu()), dx = Tensor::empty(shape, dtype, gpu());
      gelu_forward(out, gx);
      gelu_backward(dx, gx, gdout);
      expect_close("gelu " + name, to_host_floats(out), host_values(want), atol, rtol);
      expect_close("gelu' " + name, to_host_floats(dx), host_values(want_dx), atol, rtol);

      // In place: out aliases x, dx aliases dout.
      Tensor in_place = to_gpu(x, dtype);
      gelu_forward(in_place, in_place);
      expect_bitwise_equal("gelu in place " + name, to_host_floats(in_place), to_host_floats(out));
      Tensor dx_in_place = to_gpu(dout, dtype);
      gelu_backward(dx_in_place, gx, dx_in_place);
      expect_bitwise_equal("gelu' in place " + name, to_host_floats(dx_in_place),
                           to_host_floats(dx));
    }
  }
}

TEST(GpuGelu, BackwardWithBiasGradientIsBackwardThenBiasAddBackward) {
  TN_REQUIRE_GPU();
  struct Case {
    std::int64_t rows, cols;
  };
  // Many row chunks; columns not a multiple of 32; fewer rows than one chunk.
  for (const auto& [rows, cols] : {Case{5000, 64}, Case{67, 771}, Case{3, 40}}) {
    for (DType dtype : {DType::F32, DType::BF16}) {
      const std::string label = std::string("gelu' + dbias ") + name_of(dtype) + " [" +
                                std::to_string(rows) + ", " + std::to_string(cols) + "]";
      const Tensor gx = to_gpu(random_tensor({rows, cols}, 7, -4.0f, 4.0f), dtype);
      const Tensor gdout = to_gpu(random_tensor({rows, cols}, 8), dtype);
      const Tensor dbias0 = random_tensor({cols}, 9);
      // The GPU's own unfused ops: the fused kernel must give their bits.
      Tensor want_dx = Tensor::empty({rows, cols}, dtype, gpu());
      Tensor want_dbias = to_gpu(dbias0);
      gelu_backward(want_dx, gx, gdout);
      bias_add_backward(want_dbias, want_dx);
      Tensor dx = Tensor::empty({rows, cols}, dtype, gpu());
      Tensor dbias = to_gpu(dbias0);
      gelu_backward(dx, gx, gdout, &dbias);
      expect_bitwise_equal(label + " dx", to_host_floats(dx), to_host_floats(want_dx));
      expect_bitwise_equal(label + " dbias", to_host_floats(dbias), to_host_floats(want_dbias));
      // dx in place of dout.
      Tensor in_place = to_gpu(random_tensor({rows, cols}, 8), dtype);
      Tensor dbias_in_place = to_gpu(dbias0);
      gelu_backward(in_place, gx, in_place, &dbias_in_place);
      expect_bitwise_equal(label + " in place", to_host_floats(in_place), to_host_floats(dx));
      expect_bitwise_equal(label + " dbias in place", to_host_floats(dbias_in_place),
                           to_host_floats(dbias));
    }
  }
}

TEST(GpuElementwise, AddAccumulateScaleAreTheCpuOpsBitForBit) {
  TN_REQUIRE_GPU();
  // 100000 elements take the vector path (8 per thread), 100003 the one-element path.
  for (const std::int64_t n : {std::int64_t{100000}, std::int64_t{100003}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const Shape shape{n};
    const Tensor a = random_tensor(shape, 7, -3.0f, 3.0f), b = random_tensor(shape, 8);
    for (DType dtype : {DType::F32, DType::BF16}) {
      const std::string name = name_of(dtype);
      const Tensor ca = on_cpu_as(a, dtype), cb = on_cpu_as(b, dtype);
      const Tensor ga = to_gpu(a, dtype), gb = to_gpu(b, dtype);

      Tensor want_sum = Tensor::empty(shape, dtype);
      add(want_sum, ca, cb);
      Tensor sum = Tensor::empty(shape, dtype, gpu());
      add(sum, ga, gb);
      expect_bitwise_equal("add " + name, to_host_floats(sum), host_values(want_sum));

      Tensor want_acc = ca.clone();
      accumulate(want_acc, cb);
      Tensor acc = to_gpu(a, dtype);
      accumulate(acc, gb);
      expect_bitwise_equal("accumulate " + name, to_host_floats(acc), host_values(want_acc));

      Tensor want_scaled = ca.clone();
      scale(want_scaled, -0.37f);
      Tensor scaled = to_gpu(a, dtype);
      scale(scaled, -0.37f);
      expect_bitwise_equal("scale " + name, to_host_floats(scaled), host_values(want_scaled));
    }
    // F32 out += BF16 x (bf16 gradients into f32 accumulators).
    Tensor want_mixed = a.clone();
    accumulate(want_mixed, on_cpu_as(b, DType::BF16));
    Tensor mixed = to_gpu(a);
    accumulate(mixed, to_gpu(b, DType::BF16));
    ASSERT_EQ(mixed.dtype(), DType::F32);
    expect_bitwise_equal("f32 += bf16", to_host_floats(mixed), want_mixed.to_vector());
  }
}

// A view one element into its storage is not aligned for vector access: the same op on it
// takes the one-element path, and both paths give the CPU's bits.
TEST(GpuElementwise, UnalignedViewsTakeTheElementPath) {
  TN_REQUIRE_GPU();
  const std::int64_t n = 4096;
  const Tensor a = random_tensor({n + 1}, 14, -3.0f, 3.0f), b = random_tensor({n + 1}, 15);
  for (DType dtype : {DType::F32, DType::BF16}) {
    const std::string name = name_of(dtype);
    Tensor want = Tensor::empty({n}, dtype);
    add(want, on_cpu_as(a, dtype).slice(0, 1, n), on_cpu_as(b, dtype).slice(0, 1, n));
    const Tensor ga = to_gpu(a, dtype), gb = to_gpu(b, dtype);
    Tensor out_storage = Tensor::empty({n + 1}, dtype, gpu());
    Tensor out = out_storage.slice(0, 1, n);
    add(out, ga.slice(0, 1, n), gb.slice(0, 1, n));
    expect_bitwise_equal("add on unaligned views " + name, to_host_floats(out),
                         host_values(want));
    // GELU on an aligned copy (vector path) and on the unaligned view (element path).
    Tensor gelu_want = Tensor::empty({n}, dtype, gpu()), gelu_got = out_storage.slice(0, 1, n);
    gelu_forward(gelu_want, ga.slice(0, 1, n).clone());
    gelu_forward(gelu_got, ga.slice(0, 1, n));
    expect_bitwise_equal("gelu on unaligned views " + name, to_host_floats(gelu_got),
                         to_host_floats(gelu_want));
  }
}

// The elementwise grids are capped at 65535 blocks of 256 threads; past 65535 * 256 elements
// (times 8 on the vector path) every thread loops. A tensor just longer than one pass must be
// covered to its last element (the element a loop that stopped after one pass would miss).
TEST(GpuElementwise, GridStrideLoopsReachTheLastElement) {
  TN_REQUIRE_GPU();
  {
    // The vector path covers 8 elements per thread: past 65535 * 256 * 8 it loops too.
    const std::int64_t n = std::int64_t{65535} * 256 * 8 + 4096;
    const Tensor a = random_tensor({n}, 16, -3.0f, 3.0f);
    Tensor want = a.clone();
    scale(want, 0.75f);
    Tensor got = to_gpu(a);
    scale(got, 0.75f);
    expect_bitwise_equal("vector scale, n " + std::to_string(n), to_host_floats(got),
                         want.to_vector());
  }
  const std::int64_t n = std::int64_t{65535} * 256 + 1001;
  const Tensor a = random_tensor({n}, 12, -3.0f, 3.0f), b = random_tensor({n}, 13);

  Tensor want_sum = Tensor::empty({n});
  add(want_sum, a, b);
  scale(want_sum, 0.75f);
  Tensor sum = Tensor::empty({n}, DType::F32, gpu());
  add(sum, to_gpu(a), to_gpu(b));
  scale(sum, 0.75f);
  expect_bitwise_equal("add then scale, n " + std::to_string(n), to_host_floats(sum),
                       want_sum.to_vector());

  Tensor want_bf16 = Tensor::empty({n}, DType::BF16);
  convert(want_bf16, a);
  expect_bitwise_equal("convert to bf16, n " + std::to_string(n),
                       to_host_floats(to_gpu(a, DType::BF16)), host_values(want_bf16));

  const std::vector<float> filled = Tensor::full({n}, -2.5f, gpu()).to_vector();
  EXPECT_EQ(filled.front(), -2.5f);
  EXPECT_EQ(filled.back(), -2.5f);
  EXPECT_EQ(std::count(filled.begin(), filled.end(), -2.5f), n) << "fill";

  std::vector<float> with_nan = a.to_vector();
  with_nan.back() = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(all_finite(to_gpu(Tensor::from_vector(with_nan, {n})))) << "NaN at the end";
}

TEST(GpuElementwise, SumOfSquaresIsDeterministicAndMatchesCpu) {
  TN_REQUIRE_GPU();
  // One element, part of a chunk, and many chunks with a tail.
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{1000003}}) {
    const Tensor x = random_tensor({n}, 9, -2.0f, 2.0f);
    for (DType dtype : {DType::F32, DType::BF16}) {
      const std::string label = std::string("sum_of_squares ") + name_of(dtype) + " n " +
                                std::to_string(n);
      const double want = sum_of_squares(on_cpu_as(x, dtype));
      const Tensor gx = to_gpu(x, dtype);
      const double got = sum_of_squares(gx);
      EXPECT_NEAR(got, want, 1e-12 * want) << label;
      EXPECT_EQ(sum_of_squares(gx), got) << label << ", two runs";
    }
  }
  EXPECT_EQ(sum_of_squares(Tensor::empty({0}, DType::F32, gpu())), 0.0);
}

TEST(GpuElementwise, SumsOfSquaresMatchEachTensorAlone) {
  TN_REQUIRE_GPU();
  // One launch over tensors of sizes around the 16384-element chunk, an empty one among them:
  // each tensor's sum is the CPU's to its summation order, and bit for bit the one-tensor
  // call's (a tensor's chunks do not depend on its neighbours in the table).
  const std::vector<std::int64_t> sizes = {1, 0, 16383, 16384, 16385, 1000003, 7};
  for (DType dtype : {DType::F32, DType::BF16}) {
    std::vector<Tensor> on_gpu, on_cpu;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      const Tensor x = random_tensor({sizes[t]}, 20 + t, -2.0f, 2.0f);
      on_gpu.push_back(to_gpu(x, dtype));
      on_cpu.push_back(on_cpu_as(x, dtype));
    }
    const std::vector<double> got = sums_of_squares(on_gpu);
    const std::vector<double> want = sums_of_squares(on_cpu);
    ASSERT_EQ(got.size(), sizes.size());
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      const std::string label = std::string("sums_of_squares ") + name_of(dtype) + " tensor " +
                                std::to_string(t) + " n " + std::to_string(sizes[t]);
      EXPECT_NEAR(got[t], want[t], 1e-12 * want[t]) << label;
      EXPECT_EQ(got[t], sum_of_squares(on_gpu[t])) << label << " alone";
    }
    EXPECT_EQ(sums_of_squares(on_gpu), got) << "two runs";
  }
}

TEST(GpuElementwise, ZeroManyZeroesEveryTensorAndNothingElse) {
  TN_REQUIRE_GPU();
  // Sizes around the 16384-word chunk, an empty tensor, a bf16 tensor of an odd length (bytes,
  // not words) and a view in the middle of a buffer whose neighbours must stay untouched.
  const std::vector<std::int64_t> sizes = {1, 0, 16383, 16384, 16385, 1000003};
  std::vector<Tensor> tensors;
  for (std::size_t t = 0; t < sizes.size(); ++t)
    tensors.push_back(to_gpu(random_tensor({sizes[t]}, 60 + t, 1.0f, 2.0f)));
  tensors.push_back(to_gpu(random_tensor({7}, 70, 1.0f, 2.0f), DType::BF16));
  const Tensor buffer = to_gpu(random_tensor({100}, 71, 1.0f, 2.0f));
  tensors.push_back(buffer.slice(0, 10, 50));
  zero_many(tensors);
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    for (float v : to_host_floats(tensors[t])) ASSERT_EQ(v, 0.0f) << "tensor " << t;
  }
  const std::vector<float> whole = to_host_floats(buffer);
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i >= 10 && i < 60) continue;
    EXPECT_GE(whole[i], 1.0f) << "element " << i << " outside the view";
  }
}

TEST(GpuElementwise, AllFiniteFindsNanAndInf) {
  TN_REQUIRE_GPU();
  const std::int64_t n = 300001;
  const std::vector<float> clean = random_floats(static_cast<std::size_t>(n), 10);
  for (DType dtype : {DType::F32, DType::BF16}) {
    const std::string name = name_of(dtype);
    EXPECT_TRUE(all_finite(to_gpu(Tensor::from_vector(clean, {n}), dtype))) << name;
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      for (std::int64_t at : {std::int64_t{0}, n - 1}) {
        std::vector<float> with_bad = clean;
        with_bad[static_cast<std::size_t>(at)] = bad;
        EXPECT_FALSE(all_finite(to_gpu(Tensor::from_vector(with_bad, {n}), dtype)))
            << name << ": " << bad << " at " << at;
      }
    }
  }
  // The largest finite float rounds to bf16 infinity; in f32 it is finite.
  const Tensor huge = Tensor::full({3}, std::numeric_limits<float>::max());
  EXPECT_TRUE(all_finite(to_gpu(huge)));
  EXPECT_EQ(all_finite(to_gpu(huge, DType::BF16)), all_finite(on_cpu_as(huge, DType::BF16)));
  EXPECT_TRUE(all_finite(Tensor::empty({0}, DType::F32, gpu())));
}

}  // namespace
}  // namespace ternion::test
