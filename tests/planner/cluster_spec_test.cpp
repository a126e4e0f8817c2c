// Reading cluster descriptions: the presets, and bad ones refused with the key and line.
#include "planner/cluster_spec.h"

#include <gtest/gtest.h>

#include "framework/error.h"

namespace ternion {
namespace {

const char* kTwoNodes = R"(cluster:
  nodes: 2
  gpus_per_node: 4
  gpu: {name: X, peak_tflops: 100, memory_gb: 40, memory_bandwidth_gb_s: 1000}
  intra_node: {bandwidth_gb_s: 200, latency_us: 2}
  inter_node: {bandwidth_gb_s: 20}
)";

TEST(ClusterSpec, ReadsEveryKeyAndDefaultsTheOptionalOnes) {
  const ClusterSpec c = ClusterSpec::parse(kTwoNodes, "two.yaml");
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.world_size(), 8);
  EXPECT_EQ(c.node_of(3), 0);
  EXPECT_EQ(c.node_of(4), 1);
  EXPECT_EQ(c.gpu.name, "X");
  EXPECT_EQ(c.gpu.peak_tflops, 100);
  EXPECT_EQ(c.gpu.fp32_peak_tflops, 0);
  EXPECT_EQ(c.gpu.gemm_efficiency, 0.8);
  EXPECT_EQ(c.intra_node.latency_us, 2);
  EXPECT_EQ(c.inter_node.bandwidth_gb_s, 20);
  EXPECT_EQ(c.inter_node.latency_us, 0);
}

TEST(ClusterSpec, ReadsThePresets) {
  for (const char* name :
       {"dgx-a100", "dgx-h100", "dgx-h200", "cpu-local", "emulated-2x1", "emulated-2x4"}) {
    const ClusterSpec c = ClusterSpec::load_file(std::string(TERNION_SOURCE_DIR) +
                                                 "/configs/clusters/" + name + ".yaml");
    EXPECT_GT(c.world_size(), 0) << name;
    EXPECT_GT(c.gpu.peak_tflops, 0) << name;
  }
}

void expect_refused(const std::string& yaml, const std::string& message) {
  try {
    ClusterSpec::parse(yaml, "bad.yaml");
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(ClusterSpec, RefusesBadDescriptionsNamingTheKeyAndLine) {
  const std::string good = kTwoNodes;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  expect_refused(with("  nodes: 2\n", "  nodes: 2\n  racks: 1\n"),
                 "bad.yaml:3: cluster.racks: unknown key");
  expect_refused(with("name: X,", "name: X, tflops: 3,"),
                 "bad.yaml:4: cluster.gpu.tflops: unknown key");
  expect_refused(with("  nodes: 2\n", ""), "cluster.nodes: is required");
  expect_refused(with("nodes: 2", "nodes: 1.5"), "cluster.nodes: must be a whole number, got 1.5");
  expect_refused(with("peak_tflops: 100", "peak_tflops: -1"),
                 "cluster.gpu.peak_tflops: must be positive, got -1");
  expect_refused(with("peak_tflops: 100", "peak_tflops: fast"),
                 "cluster.gpu.peak_tflops: expected a number, got 'fast'");
  expect_refused(with("  inter_node: {bandwidth_gb_s: 20}\n", ""),
                 "cluster.inter_node: is required");
  expect_refused(with("memory_gb: 40", "memory_gb: 40, gemm_efficiency: 1.5"),
                 "gemm_efficiency: a fraction of the peak, at most 1");
  expect_refused(with("memory_gb: 40", "memory_gb: 40, overlap_cost: 2"),
                 "cluster.gpu.overlap_cost: a fraction, at most 1");
  expect_refused("cluster: [1, 2]\n", "cluster: must be a map of keys");
  expect_refused("nodes: 2\n", "bad.yaml:1: cluster: is required");
  expect_refused(std::string(kTwoNodes) + "racks: 2\n", "bad.yaml:7: racks: unknown key");
  expect_refused("cluster: {nodes: 2\n", "bad.yaml:");
}

TEST(ClusterSpec, RefusesAKeyGivenTwiceAsATrainingConfigDoes) {
  const std::string good = kTwoNodes;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  // yaml-cpp keeps both; read alone, the first would count and the second vanish.
  expect_refused(with("  nodes: 2\n", "  nodes: 1\n  nodes: 2\n"),
                 "bad.yaml:3: key 'nodes' appears twice (first at line 2)");
  expect_refused(with("name: X,", "name: X, name: Y,"),
                 "bad.yaml:4: key 'name' appears twice (first at line 4)");
  expect_refused(good + "cluster: {nodes: 1}\n", "bad.yaml:7: key 'cluster' appears twice");
}

// The search's time and memory grow with the GPUs: a cluster past what it plans in seconds is
// refused as it is read, naming the key, rather than ending in bad_alloc after minutes.
TEST(ClusterSpec, RefusesMoreGpusThanThePlannerPlansFor) {
  const std::string good = kTwoNodes;
  auto sized = [&](const std::string& nodes, const std::string& gpus) {
    std::string text = good;
    text.replace(text.find("nodes: 2"), 8, "nodes: " + nodes);
    text.replace(text.find("gpus_per_node: 4"), 16, "gpus_per_node: " + gpus);
    return text;
  };
  // Whole but too large is said so, not "must be a whole number".
  expect_refused(sized("2147483647", "4"),
                 "bad.yaml:2: cluster.nodes: must be at most 262144, got 2147483647");
  expect_refused(sized("2", "1e12"), "cluster.gpus_per_node: must be at most 262144, got 1e12");
  expect_refused(sized("2097152", "8"), "cluster.nodes: must be at most 262144, got 2097152");
  // Each within the cap, the product past it.
  expect_refused(sized("32769", "8"),
                 "cluster.nodes x cluster.gpus_per_node: 32769 x 8 GPUs, more than the 262144 "
                 "the planner plans for");
  const ClusterSpec largest = ClusterSpec::parse(sized("32768", "8"), "largest.yaml");
  EXPECT_EQ(largest.world_size(), kMaxClusterGpus);
}

}  // namespace
}  // namespace ternion
