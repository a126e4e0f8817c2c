// A cluster described for the planner: how many nodes of how many accelerators, how fast
// each computes and moves memory, and the links inside a node and between nodes. Read from
// YAML (configs/clusters/*.yaml are presets):
//
//   cluster:
//     nodes: 4
//     gpus_per_node: 8
//     gpu: {name: H100-SXM, peak_tflops: 989, memory_gb: 80, memory_bandwidth_gb_s: 3350}
//     intra_node: {bandwidth_gb_s: 450, latency_us: 3}   # per GPU, one direction (NVLink)
//     inter_node: {bandwidth_gb_s: 50, latency_us: 5}    # per GPU, one direction (IB/RoCE)
//
// Ranks fill nodes in order (ranks 0..gpus_per_node-1 on node 0), as mpirun and Slurm place
// them by default. Units are the ones the keys name: TFLOP/s, GB (10^9 bytes), GB/s, µs.
#pragma once

#include <cstdint>
#include <string>

namespace ternion {

struct LinkSpec {
  double bandwidth_gb_s = 0;  // per accelerator, one direction
  double latency_us = 0;      // per message
};

struct GpuSpec {
  std::string name;
  double peak_tflops = 0;       // dense bf16 (the tensor cores' rate)
  double fp32_peak_tflops = 0;  // f32 without TF32; 0 = unknown (then fp32 runs are refused)
  double memory_gb = 0;
  double memory_bandwidth_gb_s = 0;
  // The fraction of the peak large GEMMs reach (what bench_gemm measures on the target).
  double gemm_efficiency = 0.8;
  // The share of a collective's time that the compute it overlaps loses: 0 where
  // communication has engines of its own (NCCL's SMs and the NIC), near 1 for CPU ranks whose
  // communication takes cycles from the cores the backward runs on (bench/grad_overlap.sh).
  double overlap_cost = 0;
};

// The most GPUs a cluster may have (nodes x gpus_per_node): each candidate layout lays out
// every rank, so the search's time and memory grow with the GPUs; 2^18 plans in seconds and
// under 200 MB, where 2^24 (the most ranks a job may have) ran out of memory or took minutes.
inline constexpr std::int64_t kMaxClusterGpus = std::int64_t{1} << 18;

struct ClusterSpec {
  std::string source;  // the file it came from, for messages
  std::int64_t nodes = 0;
  std::int64_t gpus_per_node = 0;
  GpuSpec gpu;
  LinkSpec intra_node;
  LinkSpec inter_node;

  std::int64_t world_size() const { return nodes * gpus_per_node; }
  int node_of(int rank) const { return static_cast<int>(rank / gpus_per_node); }

  // ConfigError naming the file, line and key for an unknown key, a missing required one, a
  // wrong type or an impossible value.
  static ClusterSpec load_file(const std::string& path);
  static ClusterSpec parse(const std::string& yaml, const std::string& source_name);
};

}  // namespace ternion
