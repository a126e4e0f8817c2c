// cuBLASLt matmul against the CPU's sgemm: every transpose combination, odd shapes, beta = 0
// and beta = 1 (accumulation), F32 tightly (no TF32) and BF16 inputs with F32 or BF16 output
// against the F32 product of the bf16-rounded inputs.
#include "gpu_test_util.h"
#include "kernels/matmul.h"

namespace ternion::test {
namespace {

struct MatmulCase {
  std::int64_t m, n, k;
};

// Odd shapes (no multiple of any tile), a row vector, and a longer K.
const MatmulCase kCases[] = {{37, 53, 29}, {64, 96, 128}, {1, 7, 300}, {130, 3, 513}};

Shape a_shape(const MatmulCase& c, bool transpose_a) {
  return transpose_a ? Shape{c.k, c.m} : Shape{c.m, c.k};
}
Shape b_shape(const MatmulCase& c, bool transpose_b) {
  return transpose_b ? Shape{c.n, c.k} : Shape{c.k, c.n};
}

std::string label_of(const MatmulCase& c, bool transpose_a, bool transpose_b, float beta) {
  return "[" + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         "] a" + (transpose_a ? "^T" : "") + " @ b" + (transpose_b ? "^T" : "") + " beta " +
         std::to_string(beta);
}

// The CPU op on F32 CPU tensors.
Tensor cpu_matmul(const Tensor& out0, const Tensor& a, const Tensor& b, bool transpose_a,
                  bool transpose_b, float alpha, float beta) {
  Tensor out = out0.clone();
  matmul(out, a, b, transpose_a, transpose_b, alpha, beta);
  return out;
}

// Dot products of K terms of size <= 1 summed in another order than the CPU's: the absolute
// error grows with K.
double f32_atol(std::int64_t k) { return 2e-7 * static_cast<double>(k); }

TEST(GpuMatmul, F32MatchesCpuForEveryTransposeAndBeta) {
  TN_REQUIRE_GPU();
  for (const MatmulCase& c : kCases) {
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        const Tensor a = random_tensor(a_shape(c, transpose_a), 1);
        const Tensor b = random_tensor(b_shape(c, transpose_b), 2);
        const Tensor out0 = random_tensor({c.m, c.n}, 3);
        for (float beta : {0.0f, 1.0f}) {
          const std::string label = label_of(c, transpose_a, transpose_b, beta);
          const Tensor want = cpu_matmul(out0, a, b, transpose_a, transpose_b, 0.75f, beta);
          Tensor out = to_gpu(out0);
          matmul(out, to_gpu(a), to_gpu(b), transpose_a, transpose_b, 0.75f, beta);
          expect_close("f32 " + label, to_host_floats(out), want.to_vector(), f32_atol(c.k),
                       1e-5);
        }
      }
    }
  }
}

TEST(GpuMatmul, Bf16InputsIntoF32AndBf16Outputs) {
  TN_REQUIRE_GPU();
  for (const MatmulCase& c : kCases) {
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        const Tensor a = random_tensor(a_shape(c, transpose_a), 4);
        const Tensor b = random_tensor(b_shape(c, transpose_b), 5);
        const Tensor out0 = random_tensor({c.m, c.n}, 6);
        const Tensor ga = to_gpu(a, DType::BF16), gb = to_gpu(b, DType::BF16);
        for (float beta : {0.0f, 1.0f}) {
          const std::string label = label_of(c, transpose_a, transpose_b, beta);
          // F32 out (the weight-gradient GEMM when beta = 1): the products of bf16 values are
          // exact in F32, so only the summation order differs from the CPU.
          const Tensor want = cpu_matmul(out0, round_to_bf16(a), round_to_bf16(b), transpose_a,
                                         transpose_b, 1.0f, beta);
          Tensor out = to_gpu(out0);
          matmul(out, ga, gb, transpose_a, transpose_b, 1.0f, beta);
          expect_close("bf16 -> f32 " + label, to_host_floats(out), want.to_vector(),
                       2 * f32_atol(c.k), 1e-4);
          // BF16 out: the same, rounded once to bf16 (and out read as bf16 when beta = 1).
          const Tensor want16 = cpu_matmul(round_to_bf16(out0), round_to_bf16(a),
                                           round_to_bf16(b), transpose_a, transpose_b, 1.0f, beta);
          Tensor out16 = to_gpu(out0, DType::BF16);
          matmul(out16, ga, gb, transpose_a, transpose_b, 1.0f, beta);
          ASSERT_EQ(out16.dtype(), DType::BF16);
          expect_close("bf16 -> bf16 " + label, to_host_floats(out16), want16.to_vector(), 1e-2,
                       1e-2);
        }
      }
    }
  }
}

TEST(GpuMatmul, LinearLayerGemmsAndRepeatability) {
  TN_REQUIRE_GPU();
  // y = x @ W^T, dx = dy @ W, dW += dy^T @ x, as layers/linear.cpp calls them.
  const std::int64_t rows = 45, in = 77, out_features = 31;
  const Tensor x = random_tensor({rows, in}, 7), w = random_tensor({out_features, in}, 8);
  const Tensor dy = random_tensor({rows, out_features}, 9);
  const Tensor dw0 = random_tensor({out_features, in}, 10);
  const Tensor gx = to_gpu(x), gw = to_gpu(w), gdy = to_gpu(dy);
  Tensor y = Tensor::empty({rows, out_features}, DType::F32, gpu());
  Tensor dx = Tensor::empty({rows, in}, DType::F32, gpu());
  Tensor dw = to_gpu(dw0);
  matmul(y, gx, gw, false, true);
  matmul(dx, gdy, gw, false, false);
  matmul(dw, gdy, gx, true, false, 1.0f, 1.0f);
  expect_close("y = x W^T", to_host_floats(y),
               cpu_matmul(Tensor::zeros({rows, out_features}), x, w, false, true, 1, 0).to_vector(),
               f32_atol(in), 1e-5);
  expect_close("dx = dy W", to_host_floats(dx),
               cpu_matmul(Tensor::zeros({rows, in}), dy, w, false, false, 1, 0).to_vector(),
               f32_atol(out_features), 1e-5);
  expect_close("dW += dy^T x", to_host_floats(dw),
               cpu_matmul(dw0, dy, x, true, false, 1, 1).to_vector(), f32_atol(rows), 1e-5);

  // The cached algorithm gives the same bits on every call.
  Tensor y2 = Tensor::empty({rows, out_features}, DType::F32, gpu());
  matmul(y2, gx, gw, false, true);
  expect_bitwise_equal("y twice", to_host_floats(y2), to_host_floats(y));
}

TEST(GpuMatmul, UnalignedViewsAndEmptyK) {
  TN_REQUIRE_GPU();
  // Row slices start 29 floats (116 bytes) into their storage: not 256-byte aligned.
  const std::int64_t m = 20, n = 13, k = 29;
  const Tensor a_rows = random_tensor({m + 1, k}, 11), b = random_tensor({n, k}, 12);
  const Tensor want = cpu_matmul(Tensor::zeros({m, n}), a_rows.slice(0, 1, m).contiguous(), b,
                                 false, true, 1, 0);
  const Tensor ga_rows = to_gpu(a_rows);
  const Tensor ga = ga_rows.slice(0, 1, m);
  ASSERT_TRUE(ga.is_contiguous());
  Tensor out_rows = Tensor::zeros({m + 1, n}, DType::F32, gpu());
  Tensor out = out_rows.slice(0, 1, m);  // 13 floats in: 52 bytes
  matmul(out, ga, to_gpu(b), false, true);
  expect_close("unaligned a and out", to_host_floats(out), want.to_vector(), f32_atol(k), 1e-5);

  // K = 0: out = beta * out.
  const Tensor out0 = random_tensor({4, 5}, 13);
  Tensor scaled = to_gpu(out0), zeroed = to_gpu(out0);
  const Tensor empty_a = Tensor::empty({4, 0}, DType::F32, gpu());
  const Tensor empty_b = Tensor::empty({0, 5}, DType::F32, gpu());
  matmul(scaled, empty_a, empty_b, false, false, 1.0f, 0.5f);
  matmul(zeroed, empty_a, empty_b, false, false, 1.0f, 0.0f);
  expect_close("K = 0, beta 0.5", to_host_floats(scaled),
               cpu_matmul(out0, Tensor::empty({4, 0}), Tensor::empty({0, 5}), false, false, 1, 0.5f)
                   .to_vector(),
               0, 1e-7);
  expect_bitwise_equal("K = 0, beta 0", to_host_floats(zeroed), std::vector<float>(20, 0.0f));
}

}  // namespace
}  // namespace ternion::test
