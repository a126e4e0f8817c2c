// CPU kernels take BF16 tensors by staging them through F32 (kernels/convert.h): each op on
// BF16 operands must give exactly the F32 op on the bf16-rounded values, rounded to bf16 where
// the output is BF16. Also: the dtype combinations the ops refuse, and adamw_update_many as a
// loop of adamw_update, bit for bit.
#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include "bf16_test_util.h"

#include "kernels/adamw.h"
#include "kernels/bias_add.h"
#include "kernels/convert.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/matmul.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

using test::random_f32;
using test::rounded;
using test::to_bf16;

std::vector<float> values(const Tensor& t) { return as_f32(t).to_vector(); }

TEST(Bf16Staging, MatmulBf16InputsIntoF32EqualsF32MatmulOfRoundedInputs) {
  const std::int64_t m = 37, n = 53, k = 29;  // odd shapes
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      const std::string label = std::string("a") + (transpose_a ? "^T" : "") + " @ b" +
                                (transpose_b ? "^T" : "");
      const Tensor a = random_f32(transpose_a ? Shape{k, m} : Shape{m, k}, 1);
      const Tensor b = random_f32(transpose_b ? Shape{n, k} : Shape{k, n}, 2);
      const Tensor out0 = random_f32({m, n}, 3);
      for (float beta : {0.0f, 1.0f}) {
        Tensor got = out0.clone(), want = out0.clone();
        matmul(got, to_bf16(a), to_bf16(b), transpose_a, transpose_b, 0.5f, beta);
        matmul(want, rounded(a), rounded(b), transpose_a, transpose_b, 0.5f, beta);
        test::expect_bitwise_equal(label + " beta " + std::to_string(beta), got.to_vector(),
                                   want.to_vector());
      }
    }
  }
}

TEST(Bf16Staging, MatmulBf16OutputRoundsTheF32Result) {
  const Tensor a = random_f32({6, 10}, 4), b = random_f32({7, 10}, 5);
  const Tensor out0 = random_f32({6, 7}, 6);
  // beta 1: the bf16 output is loaded, accumulated in f32, rounded once.
  Tensor got = to_bf16(out0);
  matmul(got, to_bf16(a), to_bf16(b), false, true, 1.0f, 1.0f);
  Tensor want = rounded(out0);
  matmul(want, rounded(a), rounded(b), false, true, 1.0f, 1.0f);
  ASSERT_EQ(got.dtype(), DType::BF16);
  test::expect_bitwise_equal("bf16 out += a @ b^T", values(got), values(to_bf16(want)));
  // And the result is not simply the f32 one: the rounding happened.
  EXPECT_NE(values(got), want.to_vector());
}

TEST(Bf16Staging, GeluForwardAndBackward) {
  const Tensor x = random_f32({5, 33}, 7, -4.0f, 4.0f), dout = random_f32({5, 33}, 8);
  Tensor out = Tensor::empty({5, 33}, DType::BF16);
  gelu_forward(out, to_bf16(x));
  Tensor want = Tensor::empty({5, 33});
  gelu_forward(want, rounded(x));
  test::expect_bitwise_equal("gelu bf16", values(out), values(to_bf16(want)));

  Tensor dx = Tensor::empty({5, 33}, DType::BF16);
  gelu_backward(dx, to_bf16(x), to_bf16(dout));
  Tensor want_dx = Tensor::empty({5, 33});
  gelu_backward(want_dx, rounded(x), rounded(dout));
  test::expect_bitwise_equal("gelu' bf16", values(dx), values(to_bf16(want_dx)));

  // In place (out aliases x), as the MLP calls it.
  Tensor in_place = to_bf16(x);
  gelu_forward(in_place, in_place);
  test::expect_bitwise_equal("gelu bf16 in place", values(in_place), values(out));
}

TEST(Bf16Staging, BiasAddForwardAndBackward) {
  const Tensor rows = random_f32({9, 17}, 9), bias = random_f32({17}, 10);
  Tensor out = to_bf16(rows);
  bias_add_forward(out, to_bf16(bias));
  Tensor want = rounded(rows);
  bias_add_forward(want, rounded(bias));
  test::expect_bitwise_equal("bias_add bf16", values(out), values(to_bf16(want)));

  // bf16 dout accumulates into an f32 dbias.
  const Tensor dbias0 = random_f32({17}, 11);
  Tensor dbias = dbias0.clone(), want_dbias = dbias0.clone();
  bias_add_backward(dbias, to_bf16(rows));
  bias_add_backward(want_dbias, rounded(rows));
  test::expect_bitwise_equal("dbias += colsum(bf16 dout)", dbias.to_vector(),
                             want_dbias.to_vector());
}

TEST(Bf16Staging, ElementwiseOps) {
  const Tensor a = random_f32({300}, 12), b = random_f32({300}, 13);
  Tensor sum = Tensor::empty({300}, DType::BF16), want = Tensor::empty({300});
  add(sum, to_bf16(a), to_bf16(b));
  add(want, rounded(a), rounded(b));
  test::expect_bitwise_equal("add bf16", values(sum), values(to_bf16(want)));

  Tensor acc32 = a.clone(), want32 = a.clone();
  accumulate(acc32, to_bf16(b));  // f32 += bf16
  accumulate(want32, rounded(b));
  test::expect_bitwise_equal("f32 += bf16", acc32.to_vector(), want32.to_vector());

  Tensor acc16 = to_bf16(a), want16 = rounded(a);
  accumulate(acc16, to_bf16(b));
  accumulate(want16, rounded(b));
  test::expect_bitwise_equal("bf16 += bf16", values(acc16), values(to_bf16(want16)));

  Tensor scaled = to_bf16(a), want_scaled = rounded(a);
  scale(scaled, 0.3f);
  scale(want_scaled, 0.3f);
  test::expect_bitwise_equal("scale bf16", values(scaled), values(to_bf16(want_scaled)));

  EXPECT_EQ(sum_of_squares(to_bf16(a)), sum_of_squares(rounded(a)));
  EXPECT_TRUE(all_finite(to_bf16(a)));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> with_bad = a.to_vector();
    with_bad[123] = bad;
    EXPECT_FALSE(all_finite(to_bf16(Tensor::from_vector(with_bad, {300})))) << bad;
  }
}

TEST(Bf16Staging, RefusesMixedDtypes) {
  const Tensor a32 = Tensor::zeros({4, 4}), a16 = to_bf16(a32);
  Tensor out32 = Tensor::zeros({4, 4}), out16 = to_bf16(out32);
  EXPECT_THROW(matmul(out32, a32, a16, false, false), InternalError) << "a f32, b bf16";
  EXPECT_THROW(matmul(out16, a32, a32, false, false), InternalError) << "f32 inputs, bf16 out";
  EXPECT_THROW(gelu_forward(out16, a32), InternalError) << "gelu f32 -> bf16";
  EXPECT_THROW(add(out32, a32, a16), InternalError) << "add f32 + bf16";
  EXPECT_THROW(accumulate(out16, a32), InternalError) << "bf16 += f32";
  Tensor bias16 = Tensor::zeros({4}, DType::BF16);
  EXPECT_THROW(bias_add_forward(out32, bias16), InternalError) << "f32 rows, bf16 bias";
  EXPECT_THROW(bias_add_backward(bias16, a16), InternalError) << "bf16 dbias";
  Tensor tokens = Tensor::zeros({4, 4}, DType::I32);
  EXPECT_THROW(scale(tokens, 2.0f), InternalError) << "i32";
}

TEST(AdamWUpdateMany, EqualsLoopOfAdamWUpdateBitForBit) {
  // Sizes below and above the CPU's parallel threshold, one empty; each its own weight decay.
  const std::vector<std::int64_t> sizes{1000, 40003, 0, 7};
  const std::vector<float> decays{0.1f, 0.0f, 0.1f, 0.05f};
  std::vector<AdamWTensors> many;
  std::vector<AdamWTensors> single;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const Shape shape{sizes[i]};
    const Tensor p0 = random_f32(shape, 20 + i);
    many.push_back({p0.clone(), Tensor::zeros(shape), Tensor::zeros(shape), Tensor::zeros(shape),
                    decays[i]});
    single.push_back({p0.clone(), Tensor::zeros(shape), Tensor::zeros(shape),
                      Tensor::zeros(shape), decays[i]});
  }
  AdamWHyper h;
  h.lr = 1e-2f;
  h.eps = 1e-6f;
  h.grad_scale = 0.5f;
  h.weight_decay = 123.0f;  // ignored by adamw_update_many: each tensor has its own
  for (std::int64_t step = 1; step <= 3; ++step) {
    h.step = step;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const Tensor grad = random_f32({sizes[i]}, 100 * step + i, -2.0f, 2.0f);
      many[i].grad.copy_from(grad);
      single[i].grad.copy_from(grad);
    }
    adamw_update_many(many, h);
    for (AdamWTensors& t : single) {
      AdamWHyper own = h;
      own.weight_decay = t.weight_decay;
      adamw_update(t.param, t.grad, t.m, t.v, own);
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::string at = " tensor " + std::to_string(i) + " step " + std::to_string(step);
      test::expect_bitwise_equal("param" + at, many[i].param.to_vector(),
                                 single[i].param.to_vector());
      test::expect_bitwise_equal("m" + at, many[i].m.to_vector(), single[i].m.to_vector());
      test::expect_bitwise_equal("v" + at, many[i].v.to_vector(), single[i].v.to_vector());
    }
  }
  std::vector<AdamWTensors> mismatched{{Tensor::zeros({3}), Tensor::zeros({4}),
                                        Tensor::zeros({3}), Tensor::zeros({3}), 0.0f}};
  EXPECT_THROW(adamw_update_many(mismatched, h), InternalError) << "grad of another numel";
}

}  // namespace
}  // namespace ternion
