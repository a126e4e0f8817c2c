// convert, convert_many, and the F32 staging that lets CPU kernels take BF16 tensors.
#include <gtest/gtest.h>

#include "kernels/convert.h"
#include "tests/test_util.h"

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

TEST(Convert, ManyIsEachPairConverted) {
  std::vector<Tensor> ins, outs, want;
  const std::vector<std::int64_t> sizes = {5, 0, 70000, 3};
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    ins.push_back(Tensor::from_vector(
        test::random_floats(static_cast<std::size_t>(sizes[t]), 40 + t, -3.0f, 3.0f),
        {sizes[t]}));
    // F32 -> BF16, except one BF16 -> F32 pair: the lists may mix directions.
    const DType to = t == 3 ? DType::F32 : DType::BF16;
    if (t == 3) {
      Tensor bf16 = Tensor::empty({sizes[t]}, DType::BF16);
      convert(bf16, ins.back());
      ins.back() = bf16;
    }
    outs.push_back(Tensor::empty({sizes[t]}, to));
    want.push_back(Tensor::empty({sizes[t]}, to));
    convert(want.back(), ins.back());
  }
  convert_many(outs, ins);
  for (std::size_t t = 0; t < sizes.size(); ++t)
    test::expect_bitwise_equal("pair " + std::to_string(t), as_f32(outs[t]).to_vector(),
                               as_f32(want[t]).to_vector());
  std::vector<Tensor> one_out(outs.begin(), outs.begin() + 1);
  EXPECT_THROW(convert_many(one_out, ins), InternalError);
}

}  // namespace
}  // namespace ternion
