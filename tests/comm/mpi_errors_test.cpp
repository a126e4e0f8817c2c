// Misuse of the MPI backend fails with a CommError naming the operation and the group: at
// the call for what the caller can see (strided tensors, wrong sizes, peers and roots out of
// range, dtypes MPI cannot reduce), and from wait() for what only the transfer shows
// (a message shorter or longer than the receive buffer). The communicator keeps working after.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "comm_test_util.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {
namespace {

using test::throws_comm_error;

TEST(MpiErrors, StridedTensorIsRefused) {
  auto world = mpi_world_communicator();
  Tensor strided = Tensor::zeros({4, 6}).slice(1, 0, 3);
  EXPECT_TRUE(throws_comm_error([&] { world->all_reduce(strided, ReduceOp::Sum); },
                                {"all_reduce on group 'world'", "contiguous"}));
  EXPECT_TRUE(
      throws_comm_error([&] { world->broadcast(strided, 0); }, {"broadcast", "contiguous"}));
}

// A CUDA tensor is staged through host memory (mpi_host_staging_test.cpp runs that path on
// CPU tensors). Where this process has no CUDA runtime the copy in fails at the call, on every
// rank alike, with a CudaError; nothing is submitted, so the communicator keeps working.
TEST(MpiErrors, CudaTensorWithoutACudaRuntimeFailsAtTheCall) {
  auto world = mpi_world_communicator();
  float not_device_memory[4] = {};
  Tensor on_gpu = Tensor::wrap(not_device_memory, {4}, DType::F32, Device::cuda(0), nullptr);
  EXPECT_THROW(world->all_reduce(on_gpu, ReduceOp::Sum), CudaError);
  EXPECT_THROW(world->send(on_gpu, 0), CudaError);
  Tensor t = Tensor::full({2}, 1.0f);
  world->all_reduce(t, ReduceOp::Sum);
  EXPECT_TRUE(test::close_to("all_reduce after the refusals", t.to_vector(),
                             std::vector<double>(2, world->size()), 0, 0));
}

TEST(MpiErrors, UndefinedTensorIsRefused) {
  auto world = mpi_world_communicator();
  Tensor undefined;
  EXPECT_TRUE(throws_comm_error([&] { world->all_reduce(undefined, ReduceOp::Max); },
                                {"all_reduce", "undefined"}));
}

TEST(MpiErrors, AllGatherOutputOfTheWrongSize) {
  auto world = mpi_world_communicator();
  Tensor in = Tensor::zeros({10});
  Tensor out = Tensor::zeros({10 * world->size() + 1});
  EXPECT_TRUE(throws_comm_error(
      [&] { world->all_gather(out, in); },
      {"all_gather on group 'world'", "out has " + std::to_string(10 * world->size() + 1)}));
  Tensor ints = Tensor::zeros({10 * world->size()}, DType::I32);
  EXPECT_TRUE(
      throws_comm_error([&] { world->all_gather(ints, in); }, {"all_gather", "i32", "f32"}));
}

TEST(MpiErrors, AllGatherOverlapThatIsNotInPlace) {
  auto world = mpi_world_communicator();
  if (world->size() < 2) GTEST_SKIP() << "with one rank every overlap is the in-place one";
  Tensor out = Tensor::zeros({4 * world->size()});
  Tensor in = out.slice(0, world->rank() == 0 ? 1 : 0, 4);  // off by one from the rank's chunk
  EXPECT_TRUE(throws_comm_error([&] { world->all_gather(out, in); }, {"all_gather", "overlaps"}));
}

TEST(MpiErrors, ReduceScatterOutputOfTheWrongSize) {
  auto world = mpi_world_communicator();
  Tensor in = Tensor::zeros({10});
  const std::int64_t chunk = chunk_range(10, world->size(), world->rank()).size();
  Tensor out = Tensor::zeros({chunk + 1});
  EXPECT_TRUE(
      throws_comm_error([&] { world->reduce_scatter(out, in, ReduceOp::Sum); },
                        {"reduce_scatter on group 'world'", "ranks has " + std::to_string(chunk)}));
  Tensor aliased = in.slice(0, 0, chunk);
  if (chunk > 0) {
    EXPECT_TRUE(throws_comm_error([&] { world->reduce_scatter(aliased, in, ReduceOp::Sum); },
                                  {"reduce_scatter", "overlaps"}));
  }
}

TEST(MpiErrors, PeerOutOfRange) {
  auto world = mpi_world_communicator();
  Tensor t = Tensor::zeros({3});
  const std::string range = "out of range for a group of " + std::to_string(world->size());
  EXPECT_TRUE(
      throws_comm_error([&] { world->send(t, world->size()); },
                        {"send on group 'world'", "peer " + std::to_string(world->size()), range}));
  EXPECT_TRUE(
      throws_comm_error([&] { world->recv(t, -1); }, {"recv on group 'world'", "peer -1", range}));
  EXPECT_TRUE(throws_comm_error(
      [&] {
        world->exchange(
            {{P2POp::Kind::Send, t, 0, 0}, {P2POp::Kind::Recv, t, world->size() + 3, 0}});
      },
      {"exchange on group 'world'", "ops[1]", range}));
  EXPECT_TRUE(throws_comm_error([&] { world->send(t, 0, -2); }, {"send", "tag -2"}));
}

TEST(MpiErrors, RootOutOfRange) {
  auto world = mpi_world_communicator();
  Tensor t = Tensor::zeros({3});
  EXPECT_TRUE(
      throws_comm_error([&] { world->broadcast(t, world->size()); },
                        {"broadcast on group 'world'", "root " + std::to_string(world->size())}));
  EXPECT_TRUE(throws_comm_error([&] { world->broadcast(t, -1); }, {"broadcast", "root -1"}));
}

// bf16 reduces (mpi_bf16_test.cpp); f16 has no MPI arithmetic of ours.
TEST(MpiErrors, F16CannotBeReduced) {
  auto world = mpi_world_communicator();
  Tensor f16 = Tensor::zeros({8}, DType::F16);
  EXPECT_TRUE(throws_comm_error([&] { world->all_reduce(f16, ReduceOp::Sum); },
                                {"all_reduce on group 'world'", "cannot reduce f16"}));
  const std::int64_t chunk = chunk_range(8, world->size(), world->rank()).size();
  Tensor f16_in = Tensor::zeros({8}, DType::F16), f16_out = Tensor::zeros({chunk}, DType::F16);
  EXPECT_TRUE(throws_comm_error([&] { world->reduce_scatter(f16_out, f16_in, ReduceOp::Average); },
                                {"reduce_scatter", "cannot reduce f16"}));
}

// A sub-group's messages name it and give the world rank too.
TEST(MpiErrors, SubGroupErrorsNameTheGroup) {
  auto world = mpi_world_communicator();
  auto parity = world->split(world->rank() % 2, world->rank(), "parity");
  Tensor t = Tensor::zeros({3});
  const bool differs = parity->size() != world->size();
  EXPECT_TRUE(throws_comm_error(
      [&] { parity->broadcast(t, parity->size()); },
      {"broadcast on group 'parity' (rank " + std::to_string(parity->rank()) + " of " +
       std::to_string(parity->size()) +
       (differs ? ", world rank " + std::to_string(world->rank()) : std::string())}));
}

// Errors only the transfer reveals come out of wait(); afterwards both sides still talk.
TEST(MpiErrors, MismatchedMessageSizesFailOnWait) {
  auto world = mpi_world_communicator();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  if (world->rank() == 1) {
    world->send(Tensor::full({3}, 1.0f), 0, 11);  // shorter than rank 0's buffer
    world->send(Tensor::full({9}, 1.0f), 0, 12);  // longer
    world->send(Tensor::full({4}, 2.0f), 0, 13);  // right
    // An exchange whose first receive fails while its second is still waiting.
    world->send(Tensor::full({9}, 1.0f), 0, 14);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    world->send(Tensor::full({4}, 3.0f), 0, 15);
  } else if (world->rank() == 0) {
    Tensor five = Tensor::zeros({5});
    EXPECT_TRUE(throws_comm_error(
        [&] { world->recv(five, 1, 11); },
        {"recv on group 'world'", "received 3 elements from rank 1", "expects 5"}));
    WorkHandle truncated = world->recv_async(five, 1, 12);
    EXPECT_TRUE(
        throws_comm_error([&] { truncated->wait(); }, {"recv on group 'world'", "TRUNCATE"}));
    EXPECT_TRUE(truncated->is_completed());
    Tensor four = Tensor::zeros({4});
    world->recv(four, 1, 13);
    EXPECT_TRUE(
        test::close_to("after the errors", four.to_vector(), std::vector<double>(4, 2.0), 0, 0));
    // The exchange completes only when its second receive has landed too, then reports the
    // first one's failure.
    Tensor later = Tensor::zeros({4});
    EXPECT_TRUE(throws_comm_error(
        [&] {
          world->exchange({{P2POp::Kind::Recv, five, 1, 14}, {P2POp::Kind::Recv, later, 1, 15}});
        },
        {"exchange on group 'world'", "receiving f32[5] cpu from rank 1 (tag 14)", "TRUNCATE"}));
    EXPECT_TRUE(test::close_to("exchange's second receive", later.to_vector(),
                               std::vector<double>(4, 3.0), 0, 0));
  }
  world->barrier();
}

}  // namespace
}  // namespace ternion
