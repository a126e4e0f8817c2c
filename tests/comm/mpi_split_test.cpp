// Sub-communicators: split by color and key (parity groups, pairs in reverse order, nested
// splits, a color < 0 that leaves a rank out), split_node_local, and several groups used
// interleaved in a different order on different ranks without deadlock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {
namespace {

using test::close_to;
using test::tensor_of;
using test::values_of;

// The world ranks of `group`'s members, in group-rank order.
std::vector<std::int32_t> members(Communicator& group) {
  Tensor mine = tensor_of<std::int32_t>({MpiRuntime::world_rank()});
  Tensor all = Tensor::zeros({group.size()}, DType::I32);
  group.all_gather(all, mine);
  return values_of<std::int32_t>(all);
}

std::vector<std::int32_t> world_ranks_where(int world_size, bool (*keep)(int, int), int me) {
  std::vector<std::int32_t> out;
  for (int r = 0; r < world_size; ++r)
    if (keep(r, me)) out.push_back(r);
  return out;
}

TEST(MpiSplit, ParityGroupsOrderedByKey) {
  auto world = mpi_world_communicator();
  const int rank = world->rank();
  auto parity = world->split(rank % 2, rank, "parity" + std::to_string(rank % 2));
  ASSERT_NE(parity, nullptr);
  EXPECT_EQ(parity->name(), "parity" + std::to_string(rank % 2));
  EXPECT_EQ(parity->backend_name(), "mpi");
  EXPECT_EQ(parity->rank(), rank / 2);
  EXPECT_EQ(parity->size(), (world->size() - rank % 2 + 1) / 2);
  EXPECT_EQ(members(*parity),
            world_ranks_where(
                world->size(), [](int r, int me) { return r % 2 == me % 2; }, rank));
}

TEST(MpiSplit, KeyOrdersTheGroupPairsReversed) {
  auto world = mpi_world_communicator();
  const int rank = world->rank();
  auto pair = world->split(rank / 2, -rank, "pair");
  ASSERT_NE(pair, nullptr);
  std::vector<std::int32_t> want;
  for (int r = std::min(rank / 2 * 2 + 1, world->size() - 1); r >= rank / 2 * 2; --r)
    want.push_back(r);
  EXPECT_EQ(members(*pair), want);
  EXPECT_EQ(pair->rank(), static_cast<int>(want.size()) - 1 - rank % 2);
}

TEST(MpiSplit, NegativeColorLeavesTheRankOut) {
  auto world = mpi_world_communicator();
  const int rank = world->rank();
  auto rest = world->split(rank == 0 ? -1 : 0, rank, "all but rank 0");
  if (rank == 0) {
    EXPECT_EQ(rest, nullptr);
    return;
  }
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->size(), world->size() - 1);
  EXPECT_EQ(rest->rank(), rank - 1);
  Tensor t = tensor_of<std::int32_t>({rank});
  rest->all_reduce(t, ReduceOp::Sum);
  EXPECT_EQ(t.data<std::int32_t>()[0], world->size() * (world->size() - 1) / 2);
}

TEST(MpiSplit, SplitOfASplit) {
  auto world = mpi_world_communicator();
  const int rank = world->rank();
  auto parity = world->split(rank % 2, rank, "parity");
  auto quarter = parity->split(parity->rank() % 2, parity->rank(), "quarter");
  ASSERT_NE(quarter, nullptr);
  // World ranks with the same rank % 4.
  EXPECT_EQ(members(*quarter),
            world_ranks_where(
                world->size(), [](int r, int me) { return r % 4 == me % 4; }, rank));
}

TEST(MpiSplit, NodeLocalIsTheWholeGroupOnOneMachine) {
  auto world = mpi_world_communicator();
  auto node = world->split_node_local("node");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->name(), "node");
  EXPECT_EQ(node->size(), world->size());
  EXPECT_EQ(node->rank(), world->rank());
  auto parity = world->split(world->rank() % 2, world->rank(), "parity");
  auto parity_node = parity->split_node_local("parity node");
  EXPECT_EQ(parity_node->size(), parity->size());
  EXPECT_EQ(parity_node->rank(), parity->rank());
  EXPECT_EQ(members(*parity_node), members(*parity));
}

// Even world ranks start parity, then pair, then world; odd ones start them in the opposite
// order, and each rank waits in yet another order. Blocking collectives would deadlock on
// such a cycle; asynchronous ones on independent communicators must not.
TEST(MpiSplit, GroupsUsedInterleavedInDifferentOrdersOnDifferentRanks) {
  auto world = mpi_world_communicator();
  const int rank = world->rank();
  auto parity = world->split(rank % 2, rank, "parity");
  auto pair = world->split(rank / 2, rank, "pair");
  struct Use {
    Communicator* group;
    std::uint64_t seed;
    std::vector<std::int32_t> members;
  };
  // Collected first, in the same order everywhere: members() is itself a collective.
  std::vector<Use> uses = {{parity.get(), 91, members(*parity)},
                           {pair.get(), 92, members(*pair)},
                           {world.get(), 93, members(*world)}};
  if (rank % 2 == 1) std::reverse(uses.begin(), uses.end());
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> tensors;
    std::vector<WorkHandle> works;
    for (const Use& use : uses) {
      tensors.push_back(tensor_of(test::rank_input<float>(5000, rank, use.seed + 10 * round)));
      works.push_back(use.group->all_reduce_async(tensors.back(), ReduceOp::Sum));
    }
    for (std::size_t k = works.size(); k-- > 0;) works[(k + round) % works.size()]->wait();
    for (std::size_t k = 0; k < uses.size(); ++k) {
      // Sum over the group's members of their inputs.
      std::vector<double> want(5000, 0.0);
      for (std::int32_t member : uses[k].members) {
        const std::vector<float> input =
            test::rank_input<float>(5000, member, uses[k].seed + 10 * round);
        for (std::size_t i = 0; i < want.size(); ++i) want[i] += input[i];
      }
      EXPECT_TRUE(
          close_to("interleaved group " + uses[k].group->name() + " round " + std::to_string(round),
                   values_of<float>(tensors[k]), want, 0, 0));
    }
  }
}

// Communicators come and go (each one's MPI_Comm freed) without leaking or hanging.
TEST(MpiSplit, ManyShortLivedCommunicators) {
  auto world = mpi_world_communicator();
  for (int i = 0; i < 20; ++i) {
    auto group = world->split((world->rank() + i) % 3, world->rank(), "short-lived");
    Tensor t = tensor_of<std::int32_t>({1});
    group->all_reduce(t, ReduceOp::Sum);
    EXPECT_EQ(t.data<std::int32_t>()[0], group->size()) << "iteration " << i;
  }
}

}  // namespace
}  // namespace ternion
