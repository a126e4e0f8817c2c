// The host-staging path that CUDA tensors take through the MPI backend (`parallel.backend: mpi`
// on GPUs), run here on CPU tensors: a communicator made with stage_cpu_tensors copies every
// input to a host buffer, runs MPI on the copies, and copies the outputs back when the work
// completes. Each collective and point-to-point form is checked exactly, including the
// in-place all_gather, uneven reduce_scatter, is_completed() doing the copy back, and an error
// from the transfer coming out of wait() through the wrapper.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {
namespace {

using test::close_to;
using test::rank_input;
using test::reduced_inputs;
using test::tensor_of;
using test::test_sizes;
using test::values_of;

std::unique_ptr<MpiCommunicator> staged_world() {
  auto world = mpi_world_communicator();
  return dynamic_cast<MpiCommunicator&>(*world).duplicate("staged", {.stage_cpu_tensors = true});
}

TEST(MpiHostStaging, AllReduce) {
  auto world = staged_world();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
    for (std::int64_t n : test_sizes(world->size())) {
      Tensor t = tensor_of(rank_input<float>(n, world->rank(), 61));
      world->all_reduce(t, op);
      EXPECT_TRUE(close_to("staged all_reduce " + test::op_label(op) + " n=" + std::to_string(n),
                           values_of<float>(t), reduced_inputs<float>(n, world->size(), op, 61),
                           0, 0));
    }
  }
}

TEST(MpiHostStaging, IsCompletedCopiesTheResultBack) {
  auto world = staged_world();
  const std::int64_t n = 1000;
  Tensor t = tensor_of(rank_input<float>(n, world->rank(), 62));
  WorkHandle work = world->all_reduce_async(t, ReduceOp::Sum);
  while (!work->is_completed()) {
  }
  EXPECT_TRUE(close_to("staged all_reduce once is_completed()", values_of<float>(t),
                       reduced_inputs<float>(n, world->size(), ReduceOp::Sum, 62), 0, 0));
  work->wait();  // and wait() after it changes nothing
  EXPECT_TRUE(close_to("staged all_reduce after wait()", values_of<float>(t),
                       reduced_inputs<float>(n, world->size(), ReduceOp::Sum, 62), 0, 0));
}

std::vector<float> gathered(std::int64_t n, int size, std::uint64_t seed) {
  std::vector<float> want;
  for (int r = 0; r < size; ++r) {
    const std::vector<float> input = rank_input<float>(n, r, seed);
    want.insert(want.end(), input.begin(), input.end());
  }
  return want;
}

TEST(MpiHostStaging, AllGather) {
  auto world = staged_world();
  for (std::int64_t n : test_sizes(world->size())) {
    Tensor in = tensor_of(rank_input<float>(n, world->rank(), 63));
    Tensor out = Tensor::full({world->size() * n}, -5000.0f);
    world->all_gather(out, in);
    EXPECT_TRUE(close_to("staged all_gather n=" + std::to_string(n), values_of<float>(out),
                         gathered(n, world->size(), 63), 0, 0));
  }
}

TEST(MpiHostStaging, AllGatherInPlace) {
  auto world = staged_world();
  const std::int64_t n = 777;
  Tensor out = Tensor::full({world->size(), n}, -5000.0f);
  Tensor in = out.select(0, world->rank());
  in.copy_from(tensor_of(rank_input<float>(n, world->rank(), 64)));
  world->all_gather(out, in);
  EXPECT_TRUE(close_to("staged in-place all_gather", values_of<float>(out),
                       gathered(n, world->size(), 64), 0, 0));
}

TEST(MpiHostStaging, ReduceScatterUnevenChunks) {
  auto world = staged_world();
  const int size = world->size(), rank = world->rank();
  for (std::int64_t n : test_sizes(size)) {
    const ChunkRange chunk = chunk_range(n, size, rank);
    Tensor in = tensor_of(rank_input<std::int32_t>(n, rank, 65));
    Tensor out = Tensor::zeros({chunk.size()}, DType::I32);
    world->reduce_scatter(out, in, ReduceOp::Sum);
    const std::vector<std::int32_t> full = reduced_inputs<std::int32_t>(n, size, ReduceOp::Sum, 65);
    EXPECT_TRUE(close_to(
        "staged reduce_scatter n=" + std::to_string(n), values_of<std::int32_t>(out),
        std::vector<std::int32_t>(full.begin() + chunk.begin, full.begin() + chunk.end), 0, 0));
    EXPECT_TRUE(close_to("staged reduce_scatter leaves in alone", values_of<std::int32_t>(in),
                         rank_input<std::int32_t>(n, rank, 65), 0, 0));
  }
}

TEST(MpiHostStaging, BroadcastFromEveryRoot) {
  auto world = staged_world();
  for (int root = 0; root < world->size(); ++root) {
    const std::uint64_t seed = 66 + static_cast<std::uint64_t>(root);
    Tensor t = world->rank() == root ? tensor_of(rank_input<float>(100, root, seed))
                                     : Tensor::full({100}, -5000.0f);
    world->broadcast(t, root);
    EXPECT_TRUE(close_to("staged broadcast from " + std::to_string(root), values_of<float>(t),
                         rank_input<float>(100, root, seed), 0, 0));
  }
}

TEST(MpiHostStaging, ExchangeWithBothNeighbours) {
  auto world = staged_world();
  const int size = world->size(), rank = world->rank();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  Tensor to_next = tensor_of(rank_input<float>(300, rank, 70));
  Tensor to_prev = tensor_of(rank_input<float>(300, rank, 71));
  Tensor from_prev = Tensor::full({300}, -5000.0f), from_next = Tensor::full({300}, -5000.0f);
  world->exchange({{P2POp::Kind::Send, to_next, next, 1},
                   {P2POp::Kind::Send, to_prev, prev, 2},
                   {P2POp::Kind::Recv, from_prev, prev, 1},
                   {P2POp::Kind::Recv, from_next, next, 2}});
  EXPECT_TRUE(close_to("staged exchange from the previous rank", values_of<float>(from_prev),
                       rank_input<float>(300, prev, 70), 0, 0));
  EXPECT_TRUE(close_to("staged exchange from the next rank", values_of<float>(from_next),
                       rank_input<float>(300, next, 71), 0, 0));
}

TEST(MpiHostStaging, SendAndRecvAndTheSplitsInheritIt) {
  auto world = staged_world();
  auto parity = world->split(world->rank() % 2, world->rank(), "staged parity");
  const int next = (parity->rank() + 1) % parity->size();
  const int prev = (parity->rank() + parity->size() - 1) % parity->size();
  Tensor mine = tensor_of(rank_input<float>(50, parity->rank(), 72));
  Tensor got = Tensor::full({50}, -5000.0f);
  WorkHandle sent = parity->send_async(mine, next, 3);
  parity->recv(got, prev, 3);
  sent->wait();
  EXPECT_TRUE(close_to("staged recv on a split", values_of<float>(got),
                       rank_input<float>(50, prev, 72), 0, 0));
}

// A failure only the transfer shows still comes out of wait(), and nothing is copied back.
TEST(MpiHostStaging, TransferErrorsComeOutOfWait) {
  auto world = staged_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  if (world->rank() == 1) {
    world->send(Tensor::full({9}, 1.0f), 0, 5);  // longer than rank 0's buffer
  } else if (world->rank() == 0) {
    Tensor four = Tensor::full({4}, -1.0f);
    EXPECT_TRUE(test::throws_comm_error([&] { world->recv(four, 1, 5); },
                                        {"recv on group 'staged'", "TRUNCATE"}));
    EXPECT_TRUE(close_to("a failed receive leaves the buffer alone", values_of<float>(four),
                         std::vector<float>(4, -1.0f), 0, 0));
  }
  world->barrier();
}

}  // namespace
}  // namespace ternion
