// fast_exp, fast_sqrt and the device's newton_sqrt (kernels/vector_math.h) against the
// library's double functions, and their edge cases.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/vector_math.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

TEST(FastExp, RelativeErrorOverTheNormalRange) {
  std::vector<double> got, want;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    got.push_back(fast_exp(x));
    want.push_back(std::exp(static_cast<double>(x)));
  }
  test::expect_close("fast_exp over [-87, 88]", got, want, 0, 1e-7);
}

TEST(FastExp, EdgeCases) {
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fast_exp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fast_exp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fast_exp(1.0), std::exp(1.0));  // the double overload is the library's
}

TEST(NewtonSqrt, RelativeErrorOverTheNormalRange) {
  std::vector<double> got, want;
  for (int i = 0; i <= 200000; ++i) {
    const float x = static_cast<float>(std::pow(10.0, -37.0 + 74.0 * i / 200000.0));
    got.push_back(newton_sqrt(x));
    want.push_back(std::sqrt(static_cast<double>(x)));
  }
  test::expect_close("newton_sqrt over [1e-37, 1e37]", got, want, 0, 2e-7);
}

TEST(NewtonSqrt, EdgeCases) {
  EXPECT_EQ(newton_sqrt(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(newton_sqrt(1.0f), 1.0f);  // within 4 ulp; exact squares are not exact
  EXPECT_FLOAT_EQ(newton_sqrt(4.0f), 2.0f);
  EXPECT_EQ(newton_sqrt(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(newton_sqrt(std::numeric_limits<float>::quiet_NaN())));
  const float subnormal = newton_sqrt(std::numeric_limits<float>::denorm_min() * 1000);
  EXPECT_TRUE(std::isfinite(subnormal) && subnormal >= 0.0f && subnormal < 1e-18f) << subnormal;
}

// On the CPU fast_sqrt is the library's, correctly rounded.
TEST(FastSqrt, IsTheLibrarysOnTheCpu) {
  for (float x : {0.0f, 1e-40f, 2.0f, 3.0f, 1e30f, std::numeric_limits<float>::infinity()})
    EXPECT_EQ(fast_sqrt(x), std::sqrt(x)) << x;
  EXPECT_TRUE(std::isnan(fast_sqrt(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fast_sqrt(2.0), std::sqrt(2.0));
}

}  // namespace
}  // namespace ternion
