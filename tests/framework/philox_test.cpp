#include "framework/philox.h"

#include <gtest/gtest.h>

#include <cmath>

#include "framework/parameter.h"

namespace ternion {
namespace {

TEST(Philox, MatchesTheRandom123KnownAnswer) {
  // Known-answer vector of Philox4x32-10 from the Random123 distribution (kat_vectors):
  // counter and key all 0xffffffff... here the all-zero case.
  Philox4 out = philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(out.v[0], 0x6627e8d5u);
  EXPECT_EQ(out.v[1], 0xe169c58du);
  EXPECT_EQ(out.v[2], 0xbc57ac4cu);
  EXPECT_EQ(out.v[3], 0x9b00dbd8u);
  Philox4 ones = philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
                               0xffffffffu, 0xffffffffu);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
}

TEST(Philox, UniformAndNormalMoments) {
  RngStream stream{42, hash_name("test")};
  const int n = 200000;
  double sum_u = 0, sum_n = 0, sum_n2 = 0;
  for (int i = 0; i < n; ++i) {
    float u = philox_uniform(stream, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum_u += u;
    double z = philox_normal(stream, i);
    sum_n += z;
    sum_n2 += z * z;
  }
  EXPECT_NEAR(sum_u / n, 0.5, 0.005);
  EXPECT_NEAR(sum_n / n, 0.0, 0.01);
  EXPECT_NEAR(sum_n2 / n, 1.0, 0.01);
}

TEST(Philox, StreamsAreIndependentOfEachOther) {
  EXPECT_NE(hash_name("h.0.attn.qkv.weight"), hash_name("h.1.attn.qkv.weight"));
  EXPECT_NE(dropout_stream(1, 1, "a").stream, dropout_stream(1, 2, "a").stream);
  EXPECT_NE(philox_bits({1, 5}, 0).v[0], philox_bits({2, 5}, 0).v[0]);
}

// The property every parallel layout relies on: a shard initialises to exactly the slice of
// the whole parameter.
TEST(ParameterInit, ShardEqualsSliceOfTheWholeParameter) {
  Parameter whole =
      make_parameter("h.0.mlp.fc.weight", {12, 10}, ParameterInit::Normal, 0.02f, true);
  initialize_parameter(whole, 7);
  for (std::int64_t dim : {0, 1}) {
    const std::int64_t parts = 2, len = whole.global_shape[dim] / parts;
    for (std::int64_t r = 0; r < parts; ++r) {
      Shape local = whole.global_shape;
      local[dim] = len;
      Parameter shard = make_parameter(whole.name, local, ParameterInit::Normal, 0.02f, true);
      shard.global_shape = whole.global_shape;
      shard.shard_dim = dim;
      shard.shard_offset = r * len;
      initialize_parameter(shard, 7);
      EXPECT_EQ(shard.value.to_vector(), whole.value.slice(dim, r * len, len).to_vector())
          << "dim " << dim << " rank " << r;
    }
  }
}

TEST(ParameterInit, NormalHasTheRequestedScaleAndConstantsAreExact) {
  Parameter p = make_parameter("w", {100, 100}, ParameterInit::Normal, 0.02f, true);
  initialize_parameter(p, 1);
  double sum2 = 0;
  for (float x : p.value.to_vector()) sum2 += double(x) * x;
  EXPECT_NEAR(std::sqrt(sum2 / 10000), 0.02, 0.001);
  Parameter ones = make_parameter("ln.weight", {5}, ParameterInit::Ones, 0, false);
  initialize_parameter(ones, 1);
  EXPECT_EQ(ones.value.to_vector(), std::vector<float>(5, 1.0f));
  // Different seeds, different values.
  Parameter q = make_parameter("w", {100, 100}, ParameterInit::Normal, 0.02f, true);
  initialize_parameter(q, 2);
  EXPECT_NE(p.value.to_vector(), q.value.to_vector());
}

TEST(Philox, TheWideFormGivesTheSameNumbers) {
  for (std::uint64_t seed : {0ull, 1234ull, 0xFFFFFFFFFFFFFFFFull})
    for (std::uint64_t stream : {0ull, 7ull, 0x123456789ABCDEFull})
      for (std::uint64_t index : {0ull, 1ull, 12345ull, 0xFFFFFFFFull, 0x100000000ull, ~0ull}) {
        const Philox4 a = philox_bits({seed, stream}, index);
        const Philox4 b = philox_bits_wide({seed, stream}, index, kPhiloxMul0, kPhiloxMul1);
        for (int w = 0; w < 4; ++w)
          EXPECT_EQ(a.v[w], b.v[w]) << seed << " " << stream << " " << index;
      }
}

}  // namespace
}  // namespace ternion
