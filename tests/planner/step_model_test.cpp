// The planner's prices, each against its formula worked by hand.
#include "planner/step_model.h"

#include <gtest/gtest.h>

namespace ternion {
namespace {

ClusterSpec two_nodes_of_four() {
  ClusterSpec c;
  c.nodes = 2;
  c.gpus_per_node = 4;
  c.gpu.peak_tflops = 100;
  c.gpu.fp32_peak_tflops = 10;
  c.gpu.memory_gb = 40;
  c.gpu.memory_bandwidth_gb_s = 1000;
  c.gpu.gemm_efficiency = 0.5;
  c.intra_node = {200, 2};
  c.inter_node = {20, 10};
  return c;
}

TEST(StepModel, AGemmTakesTheLongerOfItsFlopsAndItsBytes) {
  const DevicePrices prices = device_prices(two_nodes_of_four(), /*bf16=*/true);
  EXPECT_EQ(prices.flops_per_s, 50e12);
  EXPECT_EQ(prices.memory_bytes_per_s, 1000e9);
  const GemmShape big{4096, 4096, 4096, 2};  // 137 GFLOP, 100 MB: compute-bound
  EXPECT_DOUBLE_EQ(gemm_seconds(big, prices), big.flops() / 50e12);
  const GemmShape thin{4096, 4096, 1, 2};  // 33.5 MFLOP, 33.6 MB: memory-bound
  EXPECT_DOUBLE_EQ(gemm_seconds(thin, prices), thin.bytes() / 1000e9);
  EXPECT_EQ(device_prices(two_nodes_of_four(), false).flops_per_s, 5e12);
  ClusterSpec no_fp32 = two_nodes_of_four();
  no_fp32.gpu.fp32_peak_tflops = 0;
  EXPECT_THROW(device_prices(no_fp32, false), ConfigError);
}

TEST(StepModel, OpsAddTheirGemmsAndTheirBytes) {
  const DevicePrices prices = device_prices(two_nodes_of_four(), true);
  OpCounts counts;
  const GemmShape big{4096, 4096, 4096, 2};
  counts.gemms[big] = 3;
  counts.memory_bytes = 5e9;
  EXPECT_DOUBLE_EQ(ops_seconds(counts, prices), 3 * big.flops() / 50e12 + 5e9 / 1000e9);
}

TEST(StepModel, CollectivesAreRingsOverTheirGroupsLink) {
  const ClusterSpec c = two_nodes_of_four();
  const double bytes = 1e9;
  // Inside a node: the intra-node link; 2(n-1)/n of the bytes, 2(n-1) latencies.
  EXPECT_DOUBLE_EQ(collective_seconds(CollectiveKind::all_reduce, bytes, {0, 1, 2, 3}, c),
                   6 * 2e-6 + bytes * 1.5 / 200e9);
  EXPECT_DOUBLE_EQ(collective_seconds(CollectiveKind::all_gather, bytes, {0, 1}, c),
                   1 * 2e-6 + bytes * 0.5 / 200e9);
  EXPECT_DOUBLE_EQ(collective_seconds(CollectiveKind::send, bytes, {0, 1}, c),
                   2e-6 + bytes / 200e9);
  EXPECT_EQ(collective_seconds(CollectiveKind::all_reduce, bytes, {5}, c), 0.0);
  // Across nodes, one member a node: one GPU's share of the inter-node link.
  EXPECT_DOUBLE_EQ(collective_seconds(CollectiveKind::all_reduce, bytes, {0, 4}, c),
                   2 * 10e-6 + bytes * 1.0 / 20e9);
  // Four a node share the node's four links: 80 GB/s, below the intra-node 200.
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_DOUBLE_EQ(collective_seconds(CollectiveKind::all_reduce, bytes, all, c),
                   14 * 10e-6 + bytes * 1.75 / 80e9);
}

TEST(StepModel, HierarchicalAllReduceIsItsThreeStages) {
  const ClusterSpec c = two_nodes_of_four();
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_TRUE(spans_nodes_evenly(all, c));
  EXPECT_FALSE(spans_nodes_evenly({0, 1, 2, 3}, c));     // one node
  EXPECT_FALSE(spans_nodes_evenly({0, 4}, c));           // one a node
  EXPECT_FALSE(spans_nodes_evenly({0, 1, 2, 4, 5}, c));  // uneven
  const double bytes = 1e9;
  const double inside = 3 * 2e-6 + bytes * 0.75 / 200e9;       // reduce-scatter of 4
  const double across = 2 * 10e-6 + (bytes / 4) * 1.0 / 20e9;  // all-reduce of a quarter over 2
  EXPECT_DOUBLE_EQ(hierarchical_collective_seconds(CollectiveKind::all_reduce, bytes, all, c),
                   2 * inside + across);
  // ZeRO's reduce-scatter: inside, then a reduce-scatter of the quarter across the 2 nodes.
  EXPECT_DOUBLE_EQ(hierarchical_collective_seconds(CollectiveKind::reduce_scatter, bytes, all, c),
                   inside + 1 * 10e-6 + (bytes / 4) * 0.5 / 20e9);
  EXPECT_THROW(hierarchical_collective_seconds(CollectiveKind::all_reduce, bytes, {0, 4}, c),
               InternalError);
}

}  // namespace
}  // namespace ternion
