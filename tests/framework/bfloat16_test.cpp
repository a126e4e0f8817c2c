// bf16 rounding (framework/bfloat16.h): what both devices use.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "framework/bfloat16.h"

namespace ternion {
namespace {

TEST(BFloat16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3F80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the tie goes to the even mantissa (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.00390625f)), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: it goes to the even one above.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.01171875f)), 1.015625f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);  // exact values stay exact
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  // The largest float rounds up to infinity, as IEEE rounding says.
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max()))));
}

TEST(BFloat16, RelativeErrorIsAtMostHalfAnUlp) {
  for (float x = -100.0f; x < 100.0f; x += 0.0371f) {
    const float rounded = bf16_to_float(float_to_bf16(x));
    EXPECT_LE(std::fabs(rounded - x), std::fabs(x) * (1.0f / 256.0f) + 1e-30f) << x;
  }
}

}  // namespace
}  // namespace ternion
