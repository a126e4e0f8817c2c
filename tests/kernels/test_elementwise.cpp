// Elementwise helpers against plain loops; sum_of_squares against a double sum, and
// sums_of_squares against it tensor by tensor; all_finite finds NaN and both infinities
// anywhere.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/convert.h"
#include "kernels/elementwise.h"
#include "tests/kernels/bf16_test_util.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kN = 100003;  // several reduction chunks and parallel blocks, odd tail

TEST(Elementwise, AddAccumulateScale) {
  const auto a = test::random_floats(kN, 1), b = test::random_floats(kN, 2);
  std::vector<float> sum(kN), scaled(kN);
  for (int i = 0; i < kN; ++i) sum[i] = a[i] + b[i];
  for (int i = 0; i < kN; ++i) scaled[i] = sum[i] * -0.375f;

  Tensor at = Tensor::from_vector(a, {kN}), bt = Tensor::from_vector(b, {kN});
  Tensor out = Tensor::empty({kN});
  add(out, at, bt);
  test::expect_bitwise_equal("add", out.to_vector(), sum);
  Tensor in_place = at.clone();
  add(in_place, in_place, bt);
  test::expect_bitwise_equal("add into a", in_place.to_vector(), sum);

  Tensor acc = at.clone();
  accumulate(acc, bt);
  test::expect_bitwise_equal("accumulate", acc.to_vector(), sum);

  scale(acc, -0.375f);
  test::expect_bitwise_equal("scale", acc.to_vector(), scaled);
}

TEST(Elementwise, SumOfSquares) {
  const auto x = test::random_floats(kN, 3, -3.0f, 3.0f);
  double want = 0;
  for (float v : x) want += static_cast<double>(v) * v;
  const double got = sum_of_squares(Tensor::from_vector(x, {kN}));
  EXPECT_NEAR(got, want, 1e-12 * want);
  EXPECT_EQ(sum_of_squares(Tensor::from_vector({3.0f, -4.0f}, {2})), 25.0);
}

TEST(Elementwise, SumsOfSquaresAreEachTensorsSum) {
  // Sizes around the reduction chunk, an empty tensor among them, and a bf16 list.
  const std::vector<int> sizes = {1, 0, 16383, 16384, 16385, kN, 7};
  std::vector<Tensor> xs;
  for (std::size_t t = 0; t < sizes.size(); ++t)
    xs.push_back(Tensor::from_vector(
        test::random_floats(static_cast<std::size_t>(sizes[t]), 10 + t, -2.0f, 2.0f),
        {sizes[t]}));
  const std::vector<double> sums = sums_of_squares(xs);
  ASSERT_EQ(sums.size(), xs.size());
  for (std::size_t t = 0; t < xs.size(); ++t)
    EXPECT_EQ(sums[t], sum_of_squares(xs[t])) << "tensor " << t << " of " << sizes[t];
  EXPECT_EQ(sums[1], 0.0);
  EXPECT_TRUE(sums_of_squares({}).empty());

  std::vector<Tensor> bf16;
  for (const Tensor& x : xs) bf16.push_back(test::to_bf16(x));
  const std::vector<double> bf16_sums = sums_of_squares(bf16);
  for (std::size_t t = 0; t < xs.size(); ++t)
    EXPECT_EQ(bf16_sums[t], sum_of_squares(as_f32(bf16[t]))) << "bf16 tensor " << t;
}

TEST(Elementwise, ZeroManyZeroesEachTensorOnly) {
  Tensor buffer = Tensor::full({20}, 3.0f);
  std::vector<Tensor> xs = {Tensor::full({5}, 1.0f), Tensor::full({0}, 1.0f),
                            buffer.slice(0, 4, 8)};
  zero_many(xs);
  for (float v : xs[0].to_vector()) EXPECT_EQ(v, 0.0f);
  const std::vector<float> whole = buffer.to_vector();
  for (std::size_t i = 0; i < whole.size(); ++i)
    EXPECT_EQ(whole[i], i >= 4 && i < 12 ? 0.0f : 3.0f) << i;
  std::vector<Tensor> strided = {Tensor::full({4, 4}, 1.0f).slice(1, 0, 2)};
  EXPECT_THROW(zero_many(strided), InternalError);
}

TEST(Elementwise, AllFiniteFindsNaNAndInf) {
  const auto x = test::random_floats(kN, 4);
  EXPECT_TRUE(all_finite(Tensor::from_vector(x, {kN})));
  const float kInf = std::numeric_limits<float>::infinity();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf}) {
    for (int at : {0, 70001, kN - 1}) {
      auto y = x;
      y[at] = bad;
      EXPECT_FALSE(all_finite(Tensor::from_vector(y, {kN}))) << bad << " at " << at;
    }
  }
  EXPECT_TRUE(all_finite(Tensor::from_vector(
      {std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()}, {2})));
}

}  // namespace
}  // namespace ternion
