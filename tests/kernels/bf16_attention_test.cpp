// Attention on BF16 CPU tensors: staged through F32 (kernels/convert.h), so each result is
// exactly the F32 op on the same (bf16) inputs, rounded to bf16 once. Also: mixed dtypes are
// refused.
#include <gtest/gtest.h>
#include "bf16_test_util.h"

#include "kernels/attention.h"
#include "kernels/convert.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

using test::to_bf16;

constexpr int kB = 2, kT = 9, kH = 3, kHs = 4;
constexpr int kC = kH * kHs;

// What storing an F32 result into a BF16 tensor gives, as F32 values.
std::vector<float> rounded(const Tensor& f32) { return as_f32(to_bf16(f32)).to_vector(); }

TEST(Bf16Attention, CpuStagingRoundsTheF32OpOnce) {
  const Tensor qkv = to_bf16(Tensor::from_vector(
      test::random_floats(kB * kT * 3 * kC, 21, -2.0f, 2.0f), {kB, kT, 3 * kC}));
  const Tensor dout =
      to_bf16(Tensor::from_vector(test::random_floats(kB * kT * kC, 22), {kB, kT, kC}));

  Tensor out = Tensor::empty({kB, kT, kC}, DType::BF16);
  Tensor lse = Tensor::empty({kB, kH, kT});  // F32 in every precision
  attention_forward(out, lse, qkv, kH);
  Tensor dqkv = Tensor::empty({kB, kT, 3 * kC}, DType::BF16);
  attention_backward(dqkv, dout, qkv, out, lse, kH);

  // The F32 op on the same values; the backward reads the bf16 out, as the staged op does.
  Tensor want_out = Tensor::empty({kB, kT, kC}), want_lse = Tensor::empty({kB, kH, kT});
  attention_forward(want_out, want_lse, as_f32(qkv), kH);
  Tensor want_dqkv = Tensor::empty({kB, kT, 3 * kC});
  attention_backward(want_dqkv, as_f32(dout), as_f32(qkv), as_f32(out), want_lse, kH);

  test::expect_bitwise_equal("bf16 attention out", as_f32(out).to_vector(), rounded(want_out));
  test::expect_bitwise_equal("bf16 attention lse (f32)", lse.to_vector(), want_lse.to_vector());
  test::expect_bitwise_equal("bf16 attention dqkv", as_f32(dqkv).to_vector(), rounded(want_dqkv));
  // And the values are attention's, not zeros: close to the f32 op to bf16's rounding.
  test::expect_close("bf16 attention out vs f32", as_f32(out).to_vector(), want_out.to_vector(),
                     1e-6, 4e-3);
}

TEST(Bf16Attention, RefusesMixedDtypes) {
  const Tensor qkv = Tensor::zeros({kB, kT, 3 * kC}, DType::BF16);
  Tensor out_f32 = Tensor::empty({kB, kT, kC});
  Tensor lse = Tensor::empty({kB, kH, kT});
  EXPECT_THROW(attention_forward(out_f32, lse, qkv, kH), InternalError);
  Tensor qkv_i32 = Tensor::zeros({kB, kT, 3 * kC}, DType::I32);
  Tensor out_i32 = Tensor::empty({kB, kT, kC}, DType::I32);
  EXPECT_THROW(attention_forward(out_i32, lse, qkv_i32, kH), InternalError);
}

}  // namespace
}  // namespace ternion
