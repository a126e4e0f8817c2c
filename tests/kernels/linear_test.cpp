// linear_forward on CPU: bit for bit matmul, bias_add_forward and gelu_forward called one by
// one (what Linear and Mlp ran before the op existed), for every activation, with and without
// bias, f32 and bf16, and with a residual as the transformer block's add gave it;
// linear_backward_through_gelu (matmul then gelu_backward) and linear_backward_weights (matmul then
// bias_add_backward) bit for bit the same way; the misuse checks name what is wrong.
#include <string>

#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/matmul.h"
#include "tests/kernels/bf16_test_util.h"

namespace ternion {
namespace {

using test::random_f32;
using test::to_bf16;

struct Composed {
  Tensor out, pre_activation;
};

// The unfused kernels, in the order linear_forward promises.
Composed compose(const Tensor& x, const Tensor& w, const Tensor* bias,
                 LinearActivation activation) {
  Tensor affine = Tensor::empty({x.size(0), w.size(0)}, x.dtype());
  matmul(affine, x, w, false, true);
  if (bias != nullptr) bias_add_forward(affine, *bias);
  if (activation == LinearActivation::none) return {affine, Tensor()};
  Tensor out = Tensor::empty(affine.shape(), affine.dtype());
  gelu_forward(out, affine);
  return {out, affine};
}

std::vector<float> values(const Tensor& t) { return as_f32(t).to_vector(); }

void expect_matches_composed(DType dtype, std::int64_t rows, std::int64_t k, std::int64_t n,
                             bool with_bias, LinearActivation activation) {
  const std::string label = std::string(dtype_name(dtype)) + " [" + std::to_string(rows) + "x" +
                            std::to_string(k) + "] @ [" + std::to_string(n) + "x" +
                            std::to_string(k) + "]^T" + (with_bias ? " + bias" : "") + ", " +
                            linear_activation_name(activation);
  Tensor x = random_f32({rows, k}, 1), w = random_f32({n, k}, 2), b = random_f32({n}, 3);
  if (dtype == DType::BF16) {
    x = to_bf16(x);
    w = to_bf16(w);
    b = to_bf16(b);
  }
  const Tensor* bias = with_bias ? &b : nullptr;
  const Composed want = compose(x, w, bias, activation);

  Tensor out = Tensor::full({rows, n}, 7.0f);  // overwritten, never read
  if (dtype == DType::BF16) out = to_bf16(out);
  Tensor pre = Tensor::empty({rows, n}, dtype);
  const bool gelu = activation == LinearActivation::gelu;
  linear_forward(out, gelu ? &pre : nullptr, x, w, bias, activation);
  ASSERT_EQ(out.dtype(), dtype) << label;
  test::expect_bitwise_equal(label + " out", values(out), values(want.out));
  if (gelu) {
    test::expect_bitwise_equal(label + " pre_activation", values(pre),
                               values(want.pre_activation));
  }
}

TEST(LinearForward, MatchesComposedKernelsBitForBit) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool with_bias : {false, true})
      for (LinearActivation activation : {LinearActivation::none, LinearActivation::gelu}) {
        expect_matches_composed(dtype, 21, 10, 13, with_bias, activation);
        expect_matches_composed(dtype, 1, 64, 48, with_bias, activation);
      }
}

TEST(LinearForward, GeluChangesTheResult) {
  // The comparison above can fail: gelu and none differ, and the bias is applied.
  const Tensor x = random_f32({6, 5}, 4), w = random_f32({3, 5}, 5), b = random_f32({3}, 6);
  Tensor plain = Tensor::empty({6, 3}), activated = Tensor::empty({6, 3});
  Tensor pre = Tensor::empty({6, 3}), no_bias = Tensor::empty({6, 3});
  linear_forward(plain, nullptr, x, w, &b, LinearActivation::none);
  linear_forward(activated, &pre, x, w, &b, LinearActivation::gelu);
  linear_forward(no_bias, nullptr, x, w, nullptr, LinearActivation::none);
  test::expect_bitwise_equal("pre_activation = the plain affine result", pre.to_vector(),
                             plain.to_vector());
  EXPECT_NE(activated.to_vector(), plain.to_vector());
  EXPECT_NE(no_bias.to_vector(), plain.to_vector());
  const auto p = plain.to_vector(), a = activated.to_vector();
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 1.0f) {
      EXPECT_GT(a[i], 0.8f * p[i]) << "gelu(z) ~ z for z > 1, element " << i;
    }
  }
}

TEST(LinearForward, ResidualIsAddedAsTheBlockAddedIt) {
  // out = x W^T + b + residual, bit for bit add(sum, residual, x W^T + b) (the block's old add).
  for (DType dtype : {DType::F32, DType::BF16}) {
    Tensor x = random_f32({7, 12}, 41), w = random_f32({9, 12}, 42), b = random_f32({9}, 43);
    Tensor residual = random_f32({7, 9}, 44);
    if (dtype == DType::BF16) {
      x = to_bf16(x);
      w = to_bf16(w);
      b = to_bf16(b);
      residual = to_bf16(residual);
    }
    for (bool with_bias : {false, true}) {
      const std::string label = std::string(dtype_name(dtype)) + (with_bias ? " + bias" : "");
      const Tensor* bias = with_bias ? &b : nullptr;
      const Composed branch = compose(x, w, bias, LinearActivation::none);
      Tensor want = Tensor::empty({7, 9}, dtype);
      add(want, residual, branch.out);
      Tensor out = Tensor::empty({7, 9}, dtype);
      linear_forward(out, nullptr, x, w, bias, LinearActivation::none, &residual);
      test::expect_bitwise_equal(label + " out", values(out), values(want));
      EXPECT_NE(values(out), values(branch.out)) << label;
    }
  }
}

// Expects linear_forward to throw InternalError whose message contains `needle`.
template <class Call>
void expect_error(const std::string& label, Call call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << label << ": did not throw";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << label << ": " << e.what() << " does not mention '" << needle << "'";
  }
}

TEST(LinearForward, MisuseNamesTheProblem) {
  const Tensor x = Tensor::zeros({4, 3}), w = Tensor::zeros({5, 3}), b = Tensor::zeros({5});
  Tensor out = Tensor::empty({4, 5}), pre = Tensor::empty({4, 5});
  const auto none = LinearActivation::none, gelu = LinearActivation::gelu;
  EXPECT_NO_THROW(linear_forward(out, nullptr, x, w, &b, none));
  EXPECT_NO_THROW(linear_forward(out, &pre, x, w, &b, gelu));

  expect_error("inner dimension", [&] {
    linear_forward(out, nullptr, x, Tensor::zeros({5, 4}), &b, none);
  }, "w [5, 4]");
  expect_error("out shape", [&] {
    Tensor wrong = Tensor::empty({4, 6});
    linear_forward(wrong, nullptr, x, w, &b, none);
  }, "out [4, 6]");
  expect_error("bias length", [&] {
    const Tensor short_bias = Tensor::zeros({4});
    linear_forward(out, nullptr, x, w, &short_bias, none);
  }, "bias [4]");
  expect_error("bias 2-D", [&] {
    const Tensor bias2 = Tensor::zeros({1, 5});
    linear_forward(out, nullptr, x, w, &bias2, none);
  }, "bias");
  expect_error("x 3-D", [&] {
    linear_forward(out, nullptr, Tensor::zeros({2, 2, 3}), w, &b, none);
  }, "2-D");
  expect_error("mixed dtypes", [&] {
    linear_forward(out, nullptr, x, to_bf16(w), &b, none);
  }, "x's dtype");
  expect_error("strided x", [&] {
    linear_forward(out, nullptr, Tensor::zeros({4, 6}).slice(1, 0, 3), w, &b, none);
  }, "contiguous");
  expect_error("gelu without pre_activation", [&] {
    linear_forward(out, nullptr, x, w, &b, gelu);
  }, "pre_activation");
  expect_error("pre_activation of the wrong shape", [&] {
    Tensor wrong = Tensor::empty({5, 4});
    linear_forward(out, &wrong, x, w, &b, gelu);
  }, "pre_activation [5, 4]");
  expect_error("pre_activation aliasing out", [&] {
    linear_forward(out, &out, x, w, &b, gelu);
  }, "different tensors");
  expect_error("pre_activation without an activation", [&] {
    linear_forward(out, &pre, x, w, &b, none);
  }, "only written with gelu");
  const Tensor residual = Tensor::zeros({4, 5});
  EXPECT_NO_THROW(linear_forward(out, nullptr, x, w, &b, none, &residual));
  expect_error("residual with gelu", [&] {
    linear_forward(out, &pre, x, w, &b, gelu, &residual);
  }, "only without an activation");
  expect_error("residual shape", [&] {
    const Tensor wrong = Tensor::zeros({5, 4});
    linear_forward(out, nullptr, x, w, &b, none, &wrong);
  }, "residual [5, 4]");
  expect_error("residual aliasing out", [&] {
    linear_forward(out, nullptr, x, w, &b, none, &out);
  }, "residual and out must be different");
}

// dpre = gelu'(pre) * (dy @ w) against the kernels called one by one.
TEST(LinearBackwardThroughGelu, MatchesComposedKernelsBitForBit) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    const std::string label(dtype_name(dtype));
    const std::int64_t rows = 19, n = 11, k = 24;
    Tensor dy = random_f32({rows, n}, 31), w = random_f32({n, k}, 32);
    Tensor pre = random_f32({rows, k}, 33, -4.0f, 4.0f);
    if (dtype == DType::BF16) {
      dy = to_bf16(dy);
      w = to_bf16(w);
      pre = to_bf16(pre);
    }
    Tensor want_dx = Tensor::empty({rows, k}, dtype), want = Tensor::empty({rows, k}, dtype);
    matmul(want_dx, dy, w, false, false);
    gelu_backward(want, pre, want_dx);

    Tensor got = Tensor::full({rows, k}, 7.0f);  // overwritten, never read
    if (dtype == DType::BF16) got = to_bf16(got);
    linear_backward_through_gelu(got, dy, w, pre);
    test::expect_bitwise_equal(label + " dpre", values(got), values(want));
    EXPECT_NE(values(got), values(want_dx)) << label << ": gelu' was applied";
  }
}

TEST(LinearBackwardThroughGelu, MisuseNamesTheProblem) {
  const Tensor dy = Tensor::zeros({4, 3}), w = Tensor::zeros({3, 5}), pre = Tensor::zeros({4, 5});
  Tensor dpre = Tensor::empty({4, 5});
  EXPECT_NO_THROW(linear_backward_through_gelu(dpre, dy, w, pre));
  expect_error("inner dimension", [&] {
    linear_backward_through_gelu(dpre, dy, Tensor::zeros({4, 5}), pre);
  }, "w [4, 5]");
  expect_error("pre_activation shape", [&] {
    linear_backward_through_gelu(dpre, dy, w, Tensor::zeros({4, 6}));
  }, "pre [4, 6]");
  expect_error("dpre aliasing pre_activation", [&] {
    Tensor alias = pre;
    linear_backward_through_gelu(alias, dy, w, pre);
  }, "a tensor of its own");
  expect_error("dpre aliasing dy", [&] {
    const Tensor square_dy = Tensor::zeros({4, 5}), square_w = Tensor::zeros({5, 5});
    Tensor alias = square_dy;
    linear_backward_through_gelu(alias, square_dy, square_w, pre);
  }, "a tensor of its own");
  expect_error("mixed dtypes", [&] {
    linear_backward_through_gelu(dpre, dy, to_bf16(w), pre);
  }, "dy's dtype");
}

// dw += dy^T x and dbias += column sums of dy against matmul and bias_add_backward, accumulating
// onto nonzero gradients.
TEST(LinearBackwardWeights, MatchesComposedKernelsBitForBit) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (bool with_bias : {false, true}) {
      const std::string label =
          std::string(dtype_name(dtype)) + (with_bias ? " with" : " without") + " bias";
      const std::int64_t rows = 23, n = 9, k = 14;
      Tensor dy = random_f32({rows, n}, 35), x = random_f32({rows, k}, 36);
      if (dtype == DType::BF16) {
        dy = to_bf16(dy);
        x = to_bf16(x);
      }
      const Tensor dw_start = random_f32({n, k}, 37), db_start = random_f32({n}, 38);
      Tensor want_dw = dw_start.clone(), want_db = db_start.clone();
      matmul(want_dw, dy, x, true, false, 1.0f, 1.0f);
      if (with_bias) bias_add_backward(want_db, dy);
      Tensor dw = dw_start.clone(), db = db_start.clone();
      linear_backward_weights(dw, with_bias ? &db : nullptr, dy, x);
      test::expect_bitwise_equal(label + " dw", dw.to_vector(), want_dw.to_vector());
      test::expect_bitwise_equal(label + " db", db.to_vector(), want_db.to_vector());
      EXPECT_NE(dw.to_vector(), dw_start.to_vector()) << label;
      if (with_bias) {
        EXPECT_NE(db.to_vector(), db_start.to_vector()) << label;
      }
    }
  }
}

TEST(LinearBackwardWeights, MisuseNamesTheProblem) {
  const Tensor dy = Tensor::zeros({4, 3}), x = Tensor::zeros({4, 5});
  Tensor dw = Tensor::zeros({3, 5}), db = Tensor::zeros({3});
  EXPECT_NO_THROW(linear_backward_weights(dw, &db, dy, x));
  expect_error("dw shape", [&] {
    Tensor wrong = Tensor::zeros({5, 3});
    linear_backward_weights(wrong, &db, dy, x);
  }, "dw f32[5, 3]");
  expect_error("rows differ", [&] {
    linear_backward_weights(dw, &db, dy, Tensor::zeros({3, 5}));
  }, "x f32[3, 5]");
  expect_error("bf16 dw", [&] {
    Tensor bf16 = to_bf16(dw);
    linear_backward_weights(bf16, &db, dy, x);
  }, "dw bf16[3, 5]");
  expect_error("mixed dtypes", [&] {
    linear_backward_weights(dw, &db, dy, to_bf16(x));
  }, "one float dtype");
  expect_error("dbias length", [&] {
    Tensor short_bias = Tensor::zeros({2});
    linear_backward_weights(dw, &short_bias, dy, x);
  }, "dbias");
}

}  // namespace
}  // namespace ternion
