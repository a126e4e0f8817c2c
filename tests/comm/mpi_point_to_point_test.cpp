// Point to point and the asynchronous machinery: send/recv rings in both directions, the
// blocking forms, an exchange with both neighbours at once (the pipeline swap that deadlocks
// with blocking sends), tags, a barrier that really waits, and Work handles that complete
// while the caller computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_util.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {
namespace {

using test::close_to;
using test::rank_input;
using test::tensor_of;
using test::test_sizes;
using test::values_of;

int next_of(const Communicator& c) { return (c.rank() + 1) % c.size(); }
int prev_of(const Communicator& c) { return (c.rank() + c.size() - 1) % c.size(); }

// Everyone sends to `to` and receives from `from`; the send is asynchronous, so the ring never
// waits on itself (with one rank, it sends to itself).
void check_ring(Communicator& world, bool forward) {
  const int to = forward ? next_of(world) : prev_of(world);
  const int from = forward ? prev_of(world) : next_of(world);
  for (std::int64_t n : test_sizes(world.size())) {
    const std::uint64_t seed = forward ? 51 : 52;
    Tensor mine = tensor_of(rank_input<float>(n, world.rank(), seed));
    Tensor got = Tensor::full({n}, -5000.0f);
    WorkHandle sent = world.send_async(mine, to);
    world.recv(got, from);
    sent->wait();
    EXPECT_TRUE(
        close_to(std::string(forward ? "forward" : "backward") + " ring n=" + std::to_string(n),
                 got.to_vector(), rank_input<float>(n, from, seed), 0, 0));
  }
}

TEST(MpiPointToPoint, RingForward) {
  auto world = mpi_world_communicator();
  check_ring(*world, true);
}

TEST(MpiPointToPoint, RingBackward) {
  auto world = mpi_world_communicator();
  check_ring(*world, false);
}

// Blocking send and recv, ordered so that pairs (0,1), (2,3), ... cannot deadlock.
TEST(MpiPointToPoint, BlockingSendRecvBetweenPartners) {
  auto world = mpi_world_communicator();
  const int partner = world->rank() ^ 1;
  if (partner >= world->size()) GTEST_SKIP() << "rank " << world->rank() << " has no partner";
  const std::int64_t n = world->size() <= 4 ? (1 << 20) : 4096;
  Tensor mine = tensor_of(rank_input<std::int32_t>(n, world->rank(), 53));
  Tensor got = Tensor::zeros({n}, DType::I32);
  if (world->rank() % 2 == 0) {
    world->send(mine, partner, 3);
    world->recv(got, partner, 3);
  } else {
    world->recv(got, partner, 3);
    world->send(mine, partner, 3);
  }
  EXPECT_TRUE(test::bitwise_equal("blocking send/recv i32", values_of<std::int32_t>(got),
                                  rank_input<std::int32_t>(n, partner, 53)));
}

// Every rank sends to both neighbours and receives from both in one exchange, all in the same
// order: with blocking sends of a large message, every rank would wait in its first send.
TEST(MpiPointToPoint, ExchangeWithBothNeighboursAtOnce) {
  auto world = mpi_world_communicator();
  const int next = next_of(*world), prev = prev_of(*world);
  constexpr int kToNext = 1, kToPrev = 2;  // tags: with two ranks, next and prev coincide
  for (std::int64_t n : test_sizes(world->size())) {
    Tensor to_next = tensor_of(rank_input<float>(n, world->rank(), 61));
    Tensor to_prev = tensor_of(rank_input<float>(n, world->rank(), 62));
    Tensor from_prev = Tensor::full({n}, -5000.0f), from_next = Tensor::full({n}, -5000.0f);
    world->exchange({{P2POp::Kind::Send, to_next, next, kToNext},
                     {P2POp::Kind::Send, to_prev, prev, kToPrev},
                     {P2POp::Kind::Recv, from_prev, prev, kToNext},
                     {P2POp::Kind::Recv, from_next, next, kToPrev}});
    EXPECT_TRUE(close_to("exchange: from prev n=" + std::to_string(n), from_prev.to_vector(),
                         rank_input<float>(n, prev, 61), 0, 0));
    EXPECT_TRUE(close_to("exchange: from next n=" + std::to_string(n), from_next.to_vector(),
                         rank_input<float>(n, next, 62), 0, 0));
  }
}

TEST(MpiPointToPoint, TagsMatchMessagesReceivedOutOfOrder) {
  auto world = mpi_world_communicator();
  Tensor first = tensor_of(rank_input<float>(100, world->rank(), 71));
  Tensor second = tensor_of(rank_input<float>(100, world->rank(), 72));
  WorkHandle a = world->send_async(first, next_of(*world), 5);
  WorkHandle b = world->send_async(second, next_of(*world), 6);
  Tensor got_second = Tensor::zeros({100}), got_first = Tensor::zeros({100});
  world->recv(got_second, prev_of(*world), 6);
  world->recv(got_first, prev_of(*world), 5);
  a->wait();
  b->wait();
  EXPECT_TRUE(
      close_to("tag 5", got_first.to_vector(), rank_input<float>(100, prev_of(*world), 71), 0, 0));
  EXPECT_TRUE(
      close_to("tag 6", got_second.to_vector(), rank_input<float>(100, prev_of(*world), 72), 0, 0));
}

// The send's handle is dropped and its tensor goes out of scope at once: the operation keeps
// the buffer alive until MPI is done with it.
TEST(MpiPointToPoint, DroppedHandleStillCompletesAndKeepsItsBuffer) {
  auto world = mpi_world_communicator();
  const std::int64_t n = 50000;
  world->send_async(tensor_of(rank_input<float>(n, world->rank(), 73)), next_of(*world), 9);
  Tensor got = Tensor::zeros({n});
  world->recv(got, prev_of(*world), 9);
  EXPECT_TRUE(
      close_to("dropped send", got.to_vector(), rank_input<float>(n, prev_of(*world), 73), 0, 0));
}

// Rank 1 sends only after a barrier that rank 0 joins after looking at its receive, so the
// receive cannot have completed yet: is_completed must say so, and return at once.
TEST(MpiWork, IsCompletedIsFalseUntilThePeerSends) {
  auto world = mpi_world_communicator();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  Tensor t = Tensor::zeros({64});
  if (world->rank() == 0) {
    WorkHandle received = world->recv_async(t, 1, 4);
    EXPECT_FALSE(received->is_completed());
    world->barrier();
    received->wait();
    EXPECT_TRUE(received->is_completed());
    received->wait();  // a second wait returns at once
    EXPECT_TRUE(close_to("late send", t.to_vector(), std::vector<double>(64, 7.0), 0, 0));
  } else {
    world->barrier();
    if (world->rank() == 1) {
      t.fill(7.0f);
      world->send(t, 0, 4);
    }
  }
}

// Every rank reaches the barrier later than the one before it; nobody leaves before the last
// has arrived (all ranks share this machine's steady clock).
TEST(MpiBarrier, NobodyLeavesBeforeTheLastArrives) {
  auto world = mpi_world_communicator();
  using Clock = std::chrono::steady_clock;
  auto micros = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  };
  // A common time origin, so the times fit i32 microseconds.
  const std::int64_t origin_now = micros(Clock::now());
  Tensor origin = tensor_of<std::int32_t>({static_cast<std::int32_t>(origin_now >> 31),
                                           static_cast<std::int32_t>(origin_now & 0x7fffffff)});
  world->broadcast(origin, 0);
  const std::int64_t base =
      (std::int64_t{origin.data<std::int32_t>()[0]} << 31) | origin.data<std::int32_t>()[1];
  std::this_thread::sleep_for(std::chrono::milliseconds(15 * world->rank()));
  const auto arrived = static_cast<std::int32_t>(micros(Clock::now()) - base);
  world->barrier();
  const auto left = static_cast<std::int32_t>(micros(Clock::now()) - base);
  Tensor times = tensor_of<std::int32_t>({arrived, left});
  Tensor all = Tensor::zeros({2 * world->size()}, DType::I32);
  world->all_gather(all, times);
  const std::vector<std::int32_t> t = values_of<std::int32_t>(all);
  std::int32_t last_arrival = t[0], first_departure = t[1];
  for (int r = 0; r < world->size(); ++r) {
    last_arrival = std::max(last_arrival, t[2 * r]);
    first_departure = std::min(first_departure, t[2 * r + 1]);
  }
  EXPECT_GE(first_departure, last_arrival)
      << "a rank left the barrier " << last_arrival - first_departure
      << " us before the last one arrived";
}

// Several all_reduces in flight while this thread computes; nobody calls wait() until they
// report completion, so the progress thread alone must finish them.
TEST(MpiWork, AsyncAllReducesCompleteWhileTheCallerComputes) {
  auto world = mpi_world_communicator();
  const std::int64_t n = world->size() <= 4 ? 65536 : 16384;
  constexpr int kInFlight = 4;
  std::vector<Tensor> tensors;
  std::vector<WorkHandle> works;
  for (int k = 0; k < kInFlight; ++k) {
    tensors.push_back(tensor_of(rank_input<float>(n, world->rank(), 80 + k)));
    works.push_back(world->all_reduce_async(tensors.back(), ReduceOp::Sum));
  }
  double busy = 0;  // computation overlapping the communication
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto all_done = [&] {
    return std::all_of(works.begin(), works.end(),
                       [](const WorkHandle& w) { return w->is_completed(); });
  };
  while (!all_done() && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 20000; ++i) busy += std::sqrt(static_cast<double>(i) + busy * 1e-9);
  }
  ASSERT_TRUE(all_done()) << "all_reduces still unfinished after 60 s without wait()";
  volatile double keep_the_computation = busy;  // so the compiler cannot drop it
  (void)keep_the_computation;
  for (int k = 0; k < kInFlight; ++k) {
    works[k]->wait();
    EXPECT_TRUE(close_to("async all_reduce " + std::to_string(k), values_of<float>(tensors[k]),
                         test::reduced_inputs<float>(n, world->size(), ReduceOp::Sum, 80 + k), 0,
                         0));
  }
}

}  // namespace
}  // namespace ternion
