// convert and the F32 staging that lets CPU kernels take BF16 tensors.
#include <gtest/gtest.h>

#include "kernels/convert.h"

namespace ternion {
namespace {

TEST(Convert, F32ToBf16AndBackOnCpu) {
  const Tensor x = Tensor::from_vector({1.0f, 1.00390625f, -3.14159f, 65504.0f}, {2, 2});
  Tensor bf16 = Tensor::empty({2, 2}, DType::BF16);
  convert(bf16, x);
  const std::vector<float> back = as_f32(bf16).to_vector();
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f);
  EXPECT_EQ(back[2], bf16_to_float(float_to_bf16(-3.14159f)));
  EXPECT_EQ(back[3], 65536.0f);  // 65504 needs 11 mantissa bits; bf16 keeps 8
}

TEST(Convert, F32OutputStagesBf16Targets) {
  Tensor target = Tensor::empty({3}, DType::BF16);
  convert(target, Tensor::from_vector({1.0f, 2.0f, 3.0f}, {3}));
  F32Output staged(target, /*load=*/true);
  std::vector<float> loaded = staged.get().to_vector();
  EXPECT_EQ(loaded, (std::vector<float>{1.0f, 2.0f, 3.0f}));
  staged.get().fill(0.5f);
  staged.store();
  EXPECT_EQ(as_f32(target).to_vector(), (std::vector<float>{0.5f, 0.5f, 0.5f}));

  Tensor f32 = Tensor::zeros({2});
  F32Output direct(f32);
  EXPECT_TRUE(direct.get().shares_storage_with(f32));  // no staging for F32 targets
}

}  // namespace
}  // namespace ternion
