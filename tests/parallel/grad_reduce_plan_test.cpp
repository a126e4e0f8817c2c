// plan_grad_reduce: which data groups reduce hierarchically, and their node and place groups.
#include "parallel/bucket_reduction.h"

#include <gtest/gtest.h>

namespace ternion {
namespace {

std::vector<int> iota(int n, int first = 0, int step = 1) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(first + i * step);
  return v;
}

TEST(GradReducePlan, TwoNodesOfFourSplitIntoNodeAndPlaceGroups) {
  const std::vector<int> node = {0, 0, 0, 0, 4, 4, 4, 4};
  for (GradReduceMode mode : {GradReduceMode::Auto, GradReduceMode::Hierarchical}) {
    const GradReducePlan plan = plan_grad_reduce(mode, iota(8), node, 5);
    EXPECT_TRUE(plan.hierarchical);
    EXPECT_EQ(plan.nodes, 2);
    EXPECT_EQ(plan.ranks_per_node, 4);
    EXPECT_EQ(plan.node_group, (std::vector<int>{4, 5, 6, 7}));
    EXPECT_EQ(plan.across_group, (std::vector<int>{1, 5}));
    EXPECT_TRUE(plan.why.empty());
  }
  EXPECT_FALSE(plan_grad_reduce(GradReduceMode::Flat, iota(8), node, 5).hierarchical);
}

TEST(GradReducePlan, DataGroupOfATensorByDataLayoutUsesItsOwnMembers) {
  // tp 2 x dp 4 on 2 nodes of 4 ranks: the data group of tp_rank 1 is ranks 1, 3, 5, 7.
  const std::vector<int> node = {0, 0, 0, 0, 4, 4, 4, 4};
  const GradReducePlan plan = plan_grad_reduce(GradReduceMode::Auto, iota(4, 1, 2), node, 3);
  ASSERT_TRUE(plan.hierarchical);
  EXPECT_EQ(plan.nodes, 2);
  EXPECT_EQ(plan.ranks_per_node, 2);
  EXPECT_EQ(plan.node_group, (std::vector<int>{5, 7}));
  EXPECT_EQ(plan.across_group, (std::vector<int>{3, 7}));
}

TEST(GradReducePlan, InterleavedNodesKeepDataRankOrder) {
  const std::vector<int> node = {0, 1, 0, 1};
  const GradReducePlan plan = plan_grad_reduce(GradReduceMode::Auto, iota(4), node, 3);
  ASSERT_TRUE(plan.hierarchical);
  EXPECT_EQ(plan.node_group, (std::vector<int>{1, 3}));
  EXPECT_EQ(plan.across_group, (std::vector<int>{2, 3}));
}

TEST(GradReducePlan, FlatWhereNothingIsGained) {
  struct Case {
    std::vector<int> node;
    std::string why;
  };
  const std::vector<Case> cases = {
      {{0, 0, 0, 0}, "its 4 ranks are on one node"},
      {{0, 1, 2, 3}, "it has one rank per node"},
      {{0, 0, 0, 3}, "its ranks are spread unevenly over 2 nodes (3, 1)"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(plan_grad_reduce(GradReduceMode::Auto, iota(4), c.node, 0).hierarchical);
    EXPECT_TRUE(plan_grad_reduce(GradReduceMode::Auto, iota(4), c.node, 0).why.empty());
    const GradReducePlan asked = plan_grad_reduce(GradReduceMode::Hierarchical, iota(4), c.node, 0);
    EXPECT_FALSE(asked.hierarchical);
    EXPECT_NE(asked.why.find(c.why), std::string::npos) << asked.why;
    EXPECT_NE(asked.why.find("; reducing flat"), std::string::npos) << asked.why;
  }
}

TEST(GradReducePlan, ParsesItsKeys) {
  EXPECT_EQ(parse_grad_reduce_mode("auto"), GradReduceMode::Auto);
  EXPECT_EQ(parse_wire_type("bf16"), WireType::BF16);
  EXPECT_THROW(parse_grad_reduce_mode("tree"), ConfigError);
  EXPECT_THROW(parse_wire_type("fp16"), ConfigError);
}

}  // namespace
}  // namespace ternion
