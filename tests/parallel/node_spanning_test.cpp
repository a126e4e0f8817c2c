// tensor_groups_spanning_nodes: which tensor groups would exchange activations between nodes.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/process_groups.h"

namespace ternion {
namespace {

using Groups = std::vector<std::vector<int>>;

// Ranks filled node after node, `per_node` ranks each (as mpirun places them by default);
// a node is named by its first rank.
std::vector<int> nodes_of(int world, int per_node) {
  std::vector<int> node(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) node[static_cast<std::size_t>(r)] = r / per_node * per_node;
  return node;
}

TEST(NodeSpanning, TensorGroupsWithinANodeAreFine) {
  EXPECT_EQ(tensor_groups_spanning_nodes(make_rank_layout(16, 4, 2, 2), nodes_of(16, 8)), Groups{});
  EXPECT_EQ(tensor_groups_spanning_nodes(make_rank_layout(8, 8, 1, 1), nodes_of(8, 8)), Groups{});
  EXPECT_EQ(tensor_groups_spanning_nodes(make_rank_layout(4, 1, 1, 4), nodes_of(4, 1)), Groups{});
}

TEST(NodeSpanning, TensorGroupsAcrossNodesAreNamed) {
  EXPECT_EQ(tensor_groups_spanning_nodes(make_rank_layout(8, 8, 1, 1), nodes_of(8, 4)),
            (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  // Six ranks per node, tensor groups of four: [4..7] and [16..19] straddle a boundary.
  EXPECT_EQ(tensor_groups_spanning_nodes(make_rank_layout(24, 4, 1, 6), nodes_of(24, 6)),
            (Groups{{4, 5, 6, 7}, {16, 17, 18, 19}}));
  // Any node ids will do, not only first ranks; placement need not be in blocks.
  const std::vector<int> round_robin = {7, 9, 7, 9};
  EXPECT_EQ(tensor_groups_spanning_nodes(make_rank_layout(4, 2, 1, 2), round_robin),
            (Groups{{0, 1}, {2, 3}}));
}

}  // namespace
}  // namespace ternion
