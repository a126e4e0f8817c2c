// The node-local groups are the hosts the ranks run on: on one machine (ctest's 8 ranks) and
// on the emulated cluster (tests/cli/cluster_runs.sh runs this test on 2 nodes x 2 ranks, with
// TERNION_TEST_NODES=2), every rank's node, node-local rank and group size follow from the
// ranks' host names, and a tensor group wider than a node is found to span nodes.
#include <gtest/gtest.h>

#include "mpi_gtest.h"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "parallel/process_groups.h"

namespace ternion {
namespace {

TEST(NodeGroups, NodesAreTheHostsTheRanksRunOn) {
  Communicator& world = testing_mpi::world();
  const int size = world.size(), rank = world.rank();
  const ProcessGroups groups(world, make_rank_layout(size, 1, 1, size));
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  // The host name as a float that holds it exactly (24 bits of its hash) on every rank.
  Tensor mine = Tensor::full({1}, static_cast<float>(std::hash<std::string>{}(name) & 0xFFFFFF));
  Tensor hosts = Tensor::empty({size});
  world.all_gather(hosts, mine);
  const std::vector<float> host = hosts.to_vector();

  // A node is named by its first rank; the node-local group is the ranks on this host.
  std::vector<int> want_node(static_cast<std::size_t>(size));
  int local_rank = 0, local_size = 0;
  for (int r = 0; r < size; ++r) {
    const float h = host[static_cast<std::size_t>(r)];
    int first = 0;
    while (host[static_cast<std::size_t>(first)] != h) ++first;
    want_node[static_cast<std::size_t>(r)] = first;
    if (h == host[static_cast<std::size_t>(rank)]) {
      if (r < rank) ++local_rank;
      ++local_size;
    }
  }
  EXPECT_EQ(groups.node_of_rank(), want_node) << "rank " << rank << " on " << name;
  EXPECT_EQ(groups.node_local().size(), local_size) << "rank " << rank << " on " << name;
  EXPECT_EQ(groups.node_local().rank(), local_rank) << "rank " << rank << " on " << name;

  const std::set<int> nodes(want_node.begin(), want_node.end());
  if (const char* expected = std::getenv("TERNION_TEST_NODES")) {
    EXPECT_EQ(static_cast<int>(nodes.size()), std::atoi(expected)) << "distinct hosts";
  }
  // Tensor groups of one node's ranks stay inside it; twice as wide, they span two nodes.
  if (nodes.size() > 1 && size % (2 * local_size) == 0) {
    EXPECT_TRUE(tensor_groups_spanning_nodes(
                    make_rank_layout(size, local_size, 1, size / local_size), groups.node_of_rank())
                    .empty());
    EXPECT_FALSE(tensor_groups_spanning_nodes(
                     make_rank_layout(size, 2 * local_size, 1, size / (2 * local_size)),
                     groups.node_of_rank()).empty());
  }
}

}  // namespace
}  // namespace ternion
