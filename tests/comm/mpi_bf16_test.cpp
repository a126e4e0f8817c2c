// bf16 reductions over MPI (user-defined MPI operations that combine in f32 and round back):
// all_reduce and reduce_scatter with sum, average and max on small integers (exact in bf16 at
// every partial sum, so compared bit for bit whatever order MPI combines in), arbitrary
// values within bf16 rounding, NaN in max, and all_gather's bit-exact move of bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "framework/bfloat16.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {
namespace {

using test::close_to;
using test::test_sizes;

// Rank `rank`'s values: integers in [-16, 16), so sums over 8 ranks stay within bf16's 8
// significant bits.
std::vector<float> small_ints(std::int64_t n, int rank, std::uint64_t seed) {
  return test::convert<float>(
      test::random_ints(static_cast<std::size_t>(n), seed * 131 + static_cast<std::uint64_t>(rank),
                        -16, 16));
}

Tensor bf16_tensor(const std::vector<float>& values) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::BF16);
  auto* bits = static_cast<BFloat16*>(t.raw_data());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
  return t;
}

std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  const auto* bits = static_cast<const BFloat16*>(t.raw_data());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

// Sum / max exactly (they are exact in bf16); Average is that sum divided and rounded once.
std::vector<float> expected(std::int64_t n, int size, ReduceOp op, std::uint64_t seed) {
  std::vector<float> acc(static_cast<std::size_t>(n),
                         op == ReduceOp::Max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (int r = 0; r < size; ++r) {
    const std::vector<float> input = small_ints(n, r, seed);
    for (std::size_t i = 0; i < acc.size(); ++i)
      acc[i] = op == ReduceOp::Max ? std::max(acc[i], input[i]) : acc[i] + input[i];
  }
  if (op == ReduceOp::Average)
    for (float& v : acc) v = bf16_to_float(float_to_bf16(v / static_cast<float>(size)));
  return acc;
}

void check_all_reduce(ReduceOp op, std::uint64_t seed) {
  auto world = mpi_world_communicator();
  for (std::int64_t n : test_sizes(world->size())) {
    Tensor t = bf16_tensor(small_ints(n, world->rank(), seed));
    world->all_reduce(t, op);
    EXPECT_TRUE(close_to("bf16 all_reduce " + test::op_label(op) + " n=" + std::to_string(n),
                         floats_of(t), expected(n, world->size(), op, seed), 0, 0));
  }
}

TEST(MpiBf16, AllReduceSum) { check_all_reduce(ReduceOp::Sum, 1); }
TEST(MpiBf16, AllReduceAverage) { check_all_reduce(ReduceOp::Average, 2); }
TEST(MpiBf16, AllReduceMax) { check_all_reduce(ReduceOp::Max, 3); }

void check_reduce_scatter(ReduceOp op, std::uint64_t seed) {
  auto world = mpi_world_communicator();
  const int size = world->size(), rank = world->rank();
  for (std::int64_t n : test_sizes(size)) {
    const ChunkRange chunk = chunk_range(n, size, rank);
    Tensor in = bf16_tensor(small_ints(n, rank, seed));
    Tensor out = Tensor::zeros({chunk.size()}, DType::BF16);
    world->reduce_scatter(out, in, op);
    const std::vector<float> full = expected(n, size, op, seed);
    EXPECT_TRUE(close_to("bf16 reduce_scatter " + test::op_label(op) + " n=" + std::to_string(n),
                         floats_of(out),
                         std::vector<float>(full.begin() + chunk.begin, full.begin() + chunk.end),
                         0, 0));
  }
}

TEST(MpiBf16, ReduceScatterSumUnevenChunks) { check_reduce_scatter(ReduceOp::Sum, 11); }
TEST(MpiBf16, ReduceScatterAverageUnevenChunks) { check_reduce_scatter(ReduceOp::Average, 12); }
TEST(MpiBf16, ReduceScatterMaxUnevenChunks) { check_reduce_scatter(ReduceOp::Max, 13); }

// Arbitrary positive values: every combining step rounds to bf16 (relative error 2^-9 each),
// so the sum is within about (size - 1) roundings of the exact one.
TEST(MpiBf16, SumOfArbitraryValuesIsWithinBf16Rounding) {
  auto world = mpi_world_communicator();
  const std::int64_t n = 4099;
  const auto inputs = [](int r) { return test::random_floats(4099, 200 + r, 0.5f, 2.0f); };
  Tensor t = bf16_tensor(inputs(world->rank()));
  world->all_reduce(t, ReduceOp::Sum);
  std::vector<double> want(n, 0.0);
  for (int r = 0; r < world->size(); ++r) {
    const Tensor rounded = bf16_tensor(inputs(r));  // what each rank contributes
    const std::vector<float> values = floats_of(rounded);
    for (std::int64_t i = 0; i < n; ++i) want[i] += values[i];
  }
  EXPECT_TRUE(close_to("bf16 sum of arbitrary values", floats_of(t), want, 0,
                       std::ldexp(1.0, -8) * world->size()));
}

TEST(MpiBf16, MaxPropagatesNaN) {
  auto world = mpi_world_communicator();
  std::vector<float> values = small_ints(8, world->rank(), 21);
  if (world->rank() == world->size() - 1) values[3] = std::numeric_limits<float>::quiet_NaN();
  Tensor t = bf16_tensor(values);
  world->all_reduce(t, ReduceOp::Max);
  const std::vector<float> got = floats_of(t);
  EXPECT_TRUE(std::isnan(got[3])) << "element 3 is " << got[3];
  EXPECT_FALSE(std::isnan(got[2]));
}

// The sub-group path (a communicator of its own) uses the same operations.
TEST(MpiBf16, AllReduceOnASubGroup) {
  auto world = mpi_world_communicator();
  auto parity = world->split(world->rank() % 2, world->rank(), "parity");
  Tensor t = bf16_tensor({1.0f, 2.0f, -3.0f});
  parity->all_reduce(t, ReduceOp::Sum);
  const float k = static_cast<float>(parity->size());
  EXPECT_TRUE(close_to("bf16 all_reduce on 'parity'", floats_of(t),
                       std::vector<float>{k, 2 * k, -3 * k}, 0, 0));
}

}  // namespace
}  // namespace ternion
