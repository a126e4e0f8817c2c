// The MPI backend's collectives on the world communicator, each checked exactly against the
// result every rank computes from all ranks' (regenerated) inputs: all_reduce (sum, average,
// max; f32, i32, u16), all_gather (also in place, and 2-byte bf16), reduce_scatter with
// uneven chunks, broadcast from every root.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {
namespace {

using test::close_to;
using test::rank_input;
using test::reduced_inputs;
using test::tensor_of;
using test::test_sizes;
using test::values_of;

template <class T>
void check_all_reduce(ReduceOp op, std::uint64_t seed) {
  auto world = mpi_world_communicator();
  for (std::int64_t n : test_sizes(world->size())) {
    Tensor t = tensor_of(rank_input<T>(n, world->rank(), seed));
    world->all_reduce(t, op);
    const std::string label = "all_reduce " + test::op_label(op) + " " +
                              std::string(dtype_name(dtype_of<T>())) + " n=" + std::to_string(n) +
                              " on rank " + std::to_string(world->rank());
    EXPECT_TRUE(
        close_to(label, values_of<T>(t), reduced_inputs<T>(n, world->size(), op, seed), 0, 0));
  }
}

TEST(MpiAllReduce, SumF32) { check_all_reduce<float>(ReduceOp::Sum, 1); }
TEST(MpiAllReduce, AverageF32) { check_all_reduce<float>(ReduceOp::Average, 2); }
TEST(MpiAllReduce, MaxF32) { check_all_reduce<float>(ReduceOp::Max, 3); }
TEST(MpiAllReduce, SumI32) { check_all_reduce<std::int32_t>(ReduceOp::Sum, 4); }
TEST(MpiAllReduce, AverageI32TruncatesTowardZero) {
  check_all_reduce<std::int32_t>(ReduceOp::Average, 5);
}
TEST(MpiAllReduce, MaxI32) { check_all_reduce<std::int32_t>(ReduceOp::Max, 6); }
TEST(MpiAllReduce, SumU16) { check_all_reduce<std::uint16_t>(ReduceOp::Sum, 7); }

// Arbitrary floats, where MPI's summation order shows: within f32 rounding of the exact sum.
TEST(MpiAllReduce, SumOfArbitraryFloatsIsWithinRounding) {
  auto world = mpi_world_communicator();
  const std::int64_t n = 4099;
  Tensor t = Tensor::from_vector(test::random_floats(n, 100 + world->rank()), {n});
  world->all_reduce(t, ReduceOp::Sum);
  std::vector<double> want(n, 0.0);
  for (int r = 0; r < world->size(); ++r) {
    const std::vector<float> input = test::random_floats(n, 100 + r);
    for (std::int64_t i = 0; i < n; ++i) want[i] += input[i];
  }
  EXPECT_TRUE(close_to("all_reduce sum of arbitrary f32", t.to_vector(), want, 1e-6 * world->size(),
                       1e-6 * world->size()));
}

TEST(MpiAllReduce, WorksOnAMultiDimensionalTensor) {
  auto world = mpi_world_communicator();
  Tensor t = Tensor::full({3, 5, 2}, 1.5f);
  world->all_reduce(t, ReduceOp::Sum);
  EXPECT_TRUE(close_to("all_reduce of f32[3, 5, 2]", t.to_vector(),
                       std::vector<double>(30, 1.5 * world->size()), 0, 0));
}

TEST(MpiAllGather, ConcatenatesEveryRanksInput) {
  auto world = mpi_world_communicator();
  const int size = world->size();
  for (std::int64_t n : test_sizes(size)) {
    Tensor in = tensor_of(rank_input<float>(n, world->rank(), 11));
    Tensor out = Tensor::full({size * n}, -5000.0f);
    world->all_gather(out, in);
    std::vector<float> want;
    for (int r = 0; r < size; ++r) {
      const std::vector<float> input = rank_input<float>(n, r, 11);
      want.insert(want.end(), input.begin(), input.end());
    }
    EXPECT_TRUE(close_to("all_gather f32 n=" + std::to_string(n), out.to_vector(), want, 0, 0));
    EXPECT_TRUE(close_to("all_gather leaves in alone", in.to_vector(),
                         rank_input<float>(n, world->rank(), 11), 0, 0));
  }
}

// ZeRO's parameter gather: the shard already sits in its place in the full buffer.
TEST(MpiAllGather, RunsInPlaceWhenInIsThisRanksChunkOfOut) {
  auto world = mpi_world_communicator();
  const int size = world->size();
  const std::int64_t n = 777;
  Tensor out = Tensor::full({size * n}, -5000.0f);
  Tensor in = out.slice(0, world->rank() * n, n);
  in.copy_from(tensor_of(rank_input<float>(n, world->rank(), 12)));
  world->all_gather(out, in);
  std::vector<float> want;
  for (int r = 0; r < size; ++r) {
    const std::vector<float> input = rank_input<float>(n, r, 12);
    want.insert(want.end(), input.begin(), input.end());
  }
  EXPECT_TRUE(close_to("in-place all_gather", out.to_vector(), want, 0, 0));
}

// bf16 has no MPI type; gathers move it as 2-byte words, bit for bit.
TEST(MpiAllGather, MovesBf16BitForBit) {
  auto world = mpi_world_communicator();
  const std::int64_t n = 1001;
  Tensor in = tensor_of(rank_input<std::uint16_t>(n, world->rank(), 13), DType::BF16);
  Tensor out = Tensor::zeros({world->size() * n}, DType::BF16);
  world->all_gather(out, in);
  std::vector<std::uint16_t> want;
  for (int r = 0; r < world->size(); ++r) {
    const std::vector<std::uint16_t> input = rank_input<std::uint16_t>(n, r, 13);
    want.insert(want.end(), input.begin(), input.end());
  }
  EXPECT_TRUE(test::bitwise_equal("all_gather bf16", values_of<std::uint16_t>(out), want));
}

template <class T>
void check_reduce_scatter(ReduceOp op, std::uint64_t seed) {
  auto world = mpi_world_communicator();
  const int size = world->size(), rank = world->rank();
  for (std::int64_t n : test_sizes(size)) {
    const ChunkRange chunk = chunk_range(n, size, rank);
    Tensor in = tensor_of(rank_input<T>(n, rank, seed));
    Tensor out = Tensor::zeros({chunk.size()}, dtype_of<T>());
    world->reduce_scatter(out, in, op);
    const std::vector<T> full = reduced_inputs<T>(n, size, op, seed);
    const std::vector<T> want(full.begin() + chunk.begin, full.begin() + chunk.end);
    const std::string label = "reduce_scatter " + test::op_label(op) + " " +
                              std::string(dtype_name(dtype_of<T>())) + " n=" + std::to_string(n) +
                              ", chunk " + std::to_string(rank) + " of " + std::to_string(size);
    EXPECT_TRUE(close_to(label, values_of<T>(out), want, 0, 0));
  }
}

TEST(MpiReduceScatter, SumF32UnevenChunks) { check_reduce_scatter<float>(ReduceOp::Sum, 21); }
TEST(MpiReduceScatter, AverageF32UnevenChunks) {
  check_reduce_scatter<float>(ReduceOp::Average, 22);
}
TEST(MpiReduceScatter, MaxF32UnevenChunks) { check_reduce_scatter<float>(ReduceOp::Max, 23); }
TEST(MpiReduceScatter, SumI32UnevenChunks) {
  check_reduce_scatter<std::int32_t>(ReduceOp::Sum, 24);
}
TEST(MpiReduceScatter, AverageI32UnevenChunks) {
  check_reduce_scatter<std::int32_t>(ReduceOp::Average, 25);
}

TEST(MpiBroadcast, FromEveryRoot) {
  auto world = mpi_world_communicator();
  const int size = world->size(), rank = world->rank();
  for (int root = 0; root < size; ++root) {
    for (std::int64_t n : test_sizes(size)) {
      // The large size once, from the last root: every root sends the same way.
      if (n > 1000 && root != size - 1) continue;
      const std::uint64_t seed = 31 + static_cast<std::uint64_t>(root);
      Tensor t =
          rank == root ? tensor_of(rank_input<float>(n, root, seed)) : Tensor::full({n}, -5000.0f);
      world->broadcast(t, root);
      EXPECT_TRUE(
          close_to("broadcast from root " + std::to_string(root) + " n=" + std::to_string(n),
                   t.to_vector(), rank_input<float>(n, root, seed), 0, 0));
    }
  }
}

TEST(MpiBroadcast, MovesI32AndBf16) {
  auto world = mpi_world_communicator();
  const int root = world->size() - 1;
  const std::int64_t n = 333;
  Tensor ints = world->rank() == root ? tensor_of(rank_input<std::int32_t>(n, root, 41))
                                      : Tensor::zeros({n}, DType::I32);
  Tensor halves = world->rank() == root
                      ? tensor_of(rank_input<std::uint16_t>(n, root, 42), DType::BF16)
                      : Tensor::zeros({n}, DType::BF16);
  world->broadcast(ints, root);
  world->broadcast(halves, root);
  EXPECT_TRUE(test::bitwise_equal("broadcast i32", values_of<std::int32_t>(ints),
                                  rank_input<std::int32_t>(n, root, 41)));
  EXPECT_TRUE(test::bitwise_equal("broadcast bf16", values_of<std::uint16_t>(halves),
                                  rank_input<std::uint16_t>(n, root, 42)));
}

}  // namespace
}  // namespace ternion
