// The planner's model of one training step: what a layout's ranks do, counted on the meta
// device (framework/op_cost.h: every GEMM's shape, every other op's bytes, every collective's
// group and size), priced on a cluster (planner/cluster_spec.h), and put together the way the
// run executes it:
//
//   compute     a GEMM takes max(FLOPs / (peak x gemm_efficiency), bytes / memory bandwidth),
//               any other op its bytes / memory bandwidth (a roofline per op);
//   collectives latency x steps + bytes x factor / bandwidth, with the ring algorithms'
//               factors (all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n: nccl-tests'
//               bus bandwidth), over the group's link: inside a node the intra-node link, across
//               nodes the inter-node one, whose bandwidth per GPU is shared by a node's members of
//               the group (min(intra, inter x members per node)); a hierarchical data-parallel
//               reduction as its three stages (parallel/bucket_reduction.h);
//   tensor      the tensor group's collectives are part of the forward and backward they sit
//               in (nothing overlaps them);
//   pipeline    each stage's forward and backward of one micro-batch, with its tensor-parallel
//               communication, run through the schedule's simulator
//               (parallel/pipeline_simulator.h), every message taking the time of the
//               slowest link between neighbouring stages;
//   data        the reduction starts during the last micro-batch's backward and overlaps it:
//               what is exposed is max(reduction - that backward, the largest bucket's reduction)
//               (all of it without parallel.overlap_grad_reduce), plus overlap_cost of the
//               hidden part (cluster_spec.h: what it takes from the compute); ZeRO's all-gather of
//               the updated parameters after the optimizer is exposed;
//   the rest    the optimizer step, clipping and the step's other ops, after the backward.
//
// The step is the slowest stage's: its pipeline finish, then its exposed reduction and its
// optimizer. Model FLOPs per step are 3 x forward FLOPs per token x tokens (the trainer's
// figure, layers/model_facts.h), so MFU is comparable with the run's own log.
#pragma once

#include <string>
#include <vector>

#include "framework/op_cost.h"
#include "parallel/pipeline_simulator.h"
#include "parallel/rank_layout.h"
#include "planner/cluster_spec.h"
#include "training/memory_estimate.h"
#include "training/train_config.h"

namespace ternion {

// What one rank's step did, counted on the meta device, and what it held.
struct RankStepOps {
  int rank = 0;
  MemoryEstimate memory;
  OpCostRecorder ops;
};

// Runs rank `rank`'s step of `layout` on the meta device (training/memory_estimate.h); not
// where the rank's resident memory alone exceeds `resident_limit` bytes (memory.step_counted).
RankStepOps count_rank_step(const TrainConfig& config, const RankLayout& layout, int rank,
                            std::size_t resident_limit = SIZE_MAX);

// Prices on `cluster`. `bf16` picks the bf16 peak, else the f32 one.
struct DevicePrices {
  double flops_per_s = 0;        // peak at the run's precision x gemm_efficiency
  double memory_bytes_per_s = 0;
};
DevicePrices device_prices(const ClusterSpec& cluster, bool bf16);
double gemm_seconds(const GemmShape& shape, const DevicePrices& prices);
double ops_seconds(const OpCounts& counts, const DevicePrices& prices);  // GEMMs and other ops

// A collective of `bytes` (as framework/op_cost.h counts them) over `members` (world ranks).
double collective_seconds(CollectiveKind kind, double bytes, const std::vector<int>& members,
                          const ClusterSpec& cluster);
// A data-parallel collective of `bytes` over `members` spread evenly over several nodes, run
// level by level as parallel/bucket_reduction.h does: an all-reduce reduce-scatters inside
// each node, all-reduces each member's share across nodes and all-gathers inside; ZeRO's
// reduce-scatter (all-gather) is the inside and the across stage of the same.
double hierarchical_collective_seconds(CollectiveKind kind, double bytes,
                                       const std::vector<int>& members, const ClusterSpec& cluster);
// Whether `members` span several nodes with the same number, two or more, on each (where
// parallel.grad_reduce: auto reduces hierarchically).
bool spans_nodes_evenly(const std::vector<int>& members, const ClusterSpec& cluster);

struct StepPrediction {
  // Per stage (pipeline rank), one micro-batch over all its chunks, communication included.
  std::vector<StageCost> stage_costs;
  double compute_s = 0;          // the slowest stage's forward and backward compute, whole step
  double tensor_comm_s = 0;      // its tensor-parallel collectives, whole step (all exposed)
  double pipeline_send_s = 0;    // one activation message's time on the slowest stage boundary
  double pipeline_s = 0;         // the simulated schedule's makespan
  double bubble_fraction = 0;    // of the simulated schedule
  std::string data_reduction;    // "flat" | "hierarchical" | "" (one data rank)
  double data_comm_s = 0;        // the slowest stage's data-parallel communication, all of it
  double data_comm_exposed_s = 0;
  double optimizer_s = 0;        // the slowest stage's ops outside forward and backward
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;     // model FLOPs per second per GPU
  double mfu = 0;                // of the peak at the run's precision
  double memory_gb_per_gpu = 0;  // the most any stage's rank holds at its peak
  MemoryEstimate memory;         // that rank's estimate, term by term
};

// `stages[s]`: pipeline rank s's counted step (any of its tensor and data ranks).
StepPrediction predict_step(const TrainConfig& config, const RankLayout& layout,
                            const ClusterSpec& cluster, const std::vector<RankStepOps>& stages);

}  // namespace ternion
