#include "planner/step_model.h"

#include <algorithm>
#include <limits>
#include <map>

#include "framework/error.h"
#include "layers/model_facts.h"

namespace ternion {

namespace {

// Members of the group on each node it touches.
std::map<int, int> members_per_node(const std::vector<int>& members, const ClusterSpec& cluster) {
  std::map<int, int> per_node;
  for (int rank : members) ++per_node[cluster.node_of(rank)];
  return per_node;
}

// The link a group's ring runs over: inside one node the intra-node link; across nodes the
// inter-node link, whose per-GPU bandwidth the node's members of the group use together.
LinkSpec group_link(const std::vector<int>& members, const ClusterSpec& cluster) {
  const std::map<int, int> per_node = members_per_node(members, cluster);
  if (per_node.size() <= 1) return cluster.intra_node;
  int fewest = std::numeric_limits<int>::max();
  for (const auto& [node, count] : per_node) fewest = std::min(fewest, count);
  LinkSpec link;
  link.bandwidth_gb_s = cluster.inter_node.bandwidth_gb_s * fewest;
  link.latency_us = cluster.inter_node.latency_us;
  if (cluster.gpus_per_node > 1) {
    link.bandwidth_gb_s = std::min(link.bandwidth_gb_s, cluster.intra_node.bandwidth_gb_s);
    link.latency_us = std::max(link.latency_us, cluster.intra_node.latency_us);
  }
  return link;
}

double ring_seconds(double bytes, double factor, double steps, const LinkSpec& link) {
  return steps * link.latency_us * 1e-6 + bytes * factor / (link.bandwidth_gb_s * 1e9);
}

bool starts_with(const std::string& text, const char* prefix) {
  return text.rfind(prefix, 0) == 0;
}

// One call's seconds: hierarchical (a data-parallel reduction where the run reduces so) or
// as one ring.
double call_seconds(CollectiveKind kind, double bytes, const std::vector<int>& members,
                    const ClusterSpec& cluster, bool hierarchical) {
  return hierarchical ? hierarchical_collective_seconds(kind, bytes, members, cluster)
                      : collective_seconds(kind, bytes, members, cluster);
}

// The seconds of the collectives in `counts` on groups whose name starts with `prefix`; with
// `slowest_call`, the longest single call too (the largest bucket's).
double groups_seconds(const OpCounts& counts, const OpCostRecorder& ops, const char* prefix,
                      const ClusterSpec& cluster, bool hierarchical,
                      double* slowest_call = nullptr) {
  double total = 0;
  for (const auto& [key, totals] : counts.collectives) {
    const auto& [group, kind] = key;
    if (!starts_with(group, prefix) || totals.calls == 0) continue;
    const std::vector<int>& members = ops.group_members().at(group);
    total += totals.calls *
             call_seconds(kind, totals.bytes / totals.calls, members, cluster, hierarchical);
    if (slowest_call != nullptr)
      *slowest_call = std::max(*slowest_call,
                               call_seconds(kind, totals.largest, members, cluster, hierarchical));
  }
  return total;
}

double peak_flops(const ClusterSpec& cluster, bool bf16) {
  const double tflops = bf16 ? cluster.gpu.peak_tflops : cluster.gpu.fp32_peak_tflops;
  TN_CHECK_AS(ConfigError, tflops > 0, cluster.source,
              ": cluster.gpu.fp32_peak_tflops is needed to plan a run at training.precision fp32");
  return tflops * 1e12;
}

}  // namespace

RankStepOps count_rank_step(const TrainConfig& config, const RankLayout& layout, int rank,
                            std::size_t resident_limit) {
  RankStepOps counted;
  counted.rank = rank;
  counted.memory = estimate_memory(config, layout, rank, &counted.ops, resident_limit);
  return counted;
}

DevicePrices device_prices(const ClusterSpec& cluster, bool bf16) {
  return {peak_flops(cluster, bf16) * cluster.gpu.gemm_efficiency,
          cluster.gpu.memory_bandwidth_gb_s * 1e9};
}

double gemm_seconds(const GemmShape& shape, const DevicePrices& prices) {
  return std::max(shape.flops() / prices.flops_per_s, shape.bytes() / prices.memory_bytes_per_s);
}

double ops_seconds(const OpCounts& counts, const DevicePrices& prices) {
  double seconds = counts.memory_bytes / prices.memory_bytes_per_s;
  for (const auto& [shape, count] : counts.gemms) seconds += count * gemm_seconds(shape, prices);
  return seconds;
}

double collective_seconds(CollectiveKind kind, double bytes, const std::vector<int>& members,
                          const ClusterSpec& cluster) {
  const double n = static_cast<double>(members.size());
  if (n <= 1) return 0;
  const LinkSpec link = group_link(members, cluster);
  switch (kind) {
    case CollectiveKind::all_reduce: return ring_seconds(bytes, 2 * (n - 1) / n, 2 * (n - 1), link);
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter: return ring_seconds(bytes, (n - 1) / n, n - 1, link);
    case CollectiveKind::broadcast:
    case CollectiveKind::send: return ring_seconds(bytes, 1, 1, link);
  }
  return 0;
}

bool spans_nodes_evenly(const std::vector<int>& members, const ClusterSpec& cluster) {
  const std::map<int, int> per_node = members_per_node(members, cluster);
  if (per_node.size() < 2) return false;
  const int first = per_node.begin()->second;
  for (const auto& [node, count] : per_node)
    if (count != first) return false;
  return first >= 2;
}

double hierarchical_collective_seconds(CollectiveKind kind, double bytes,
                                       const std::vector<int>& members,
                                       const ClusterSpec& cluster) {
  TN_CHECK(spans_nodes_evenly(members, cluster), "a hierarchical reduction needs a group spread ",
           "evenly, two or more a node, over several nodes");
  const std::map<int, int> per_node = members_per_node(members, cluster);
  const double local = per_node.begin()->second, nodes = static_cast<double>(per_node.size());
  // Every member's share crosses at once, each on its own GPU's part of the network.
  const LinkSpec across{cluster.inter_node.bandwidth_gb_s, cluster.inter_node.latency_us};
  const double inside = ring_seconds(bytes, (local - 1) / local, local - 1, cluster.intra_node);
  const double share = bytes / local;
  switch (kind) {
    case CollectiveKind::all_reduce:
      return 2 * inside + ring_seconds(share, 2 * (nodes - 1) / nodes, 2 * (nodes - 1), across);
    case CollectiveKind::reduce_scatter:  // ZeRO: the across stage keeps scattering, no gather
    case CollectiveKind::all_gather:
      return inside + ring_seconds(share, (nodes - 1) / nodes, nodes - 1, across);
    case CollectiveKind::broadcast:
    case CollectiveKind::send: break;
  }
  return collective_seconds(kind, bytes, members, cluster);
}

StepPrediction predict_step(const TrainConfig& config, const RankLayout& layout,
                            const ClusterSpec& cluster, const std::vector<RankStepOps>& stages) {
  TN_CHECK(static_cast<int>(stages.size()) == layout.pp_size, stages.size(),
           " counted stages for ", layout.pp_size, " pipeline stages");
  const bool bf16 = config.training.precision == "bf16";
  const DevicePrices prices = device_prices(cluster, bf16);
  const ParallelConfig& p = config.parallel;
  const int micro_batches = static_cast<int>(config.micro_batches_per_step(layout.world_size));

  // Data-parallel reduction: hierarchical where the run would choose it (bucket_reduction.h).
  const std::vector<int>& dp_members = layout.dp_group(stages.front().rank);
  const bool hierarchical = p.grad_compression == "none" && p.grad_reduce != "flat" &&
                            spans_nodes_evenly(dp_members, cluster);

  StepPrediction out;
  if (layout.dp_size > 1) out.data_reduction = hierarchical ? "hierarchical" : "flat";
  std::vector<double> compute(stages.size()), tensor(stages.size()), data(stages.size()),
      data_exposed(stages.size()), other(stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const OpCostRecorder& ops = stages[s].ops;
    const OpCounts& fwd = ops.counts(OpPhase::forward);
    const OpCounts& bwd = ops.counts(OpPhase::backward);
    const OpCounts& rest = ops.counts(OpPhase::other);
    const double tp_fwd = groups_seconds(fwd, ops, "tp", cluster, false);
    const double tp_bwd = groups_seconds(bwd, ops, "tp", cluster, false);
    const double f = ops_seconds(fwd, prices), b = ops_seconds(bwd, prices);
    compute[s] = f + b;
    tensor[s] = tp_fwd + tp_bwd;
    // A split backward's W share, from its own counts (a half where the backward ran whole:
    // then no schedule asks for it).
    const double w = ops_seconds(ops.weight_gradients(), prices);
    const double share = w > 0 && b + tp_bwd > 0 ? std::min(1.0, w / (b + tp_bwd)) : 0.5;
    out.stage_costs.push_back(
        {(f + tp_fwd) / micro_batches, (b + tp_bwd) / micro_batches, share});

    // Buckets reduce during the backward (ZeRO-2's every micro-batch, else the last one's).
    double slowest_bucket = 0;
    const double during = groups_seconds(bwd, ops, "dp", cluster, hierarchical, &slowest_bucket);
    const double window = !p.overlap_grad_reduce ? 0
                          : p.zero_stage >= 2    ? b
                                                 : b / micro_batches;
    const double after = groups_seconds(rest, ops, "dp", cluster, hierarchical);
    data[s] = during + after;
    const double exposed = window > 0 ? std::max(during - window, slowest_bucket) : during;
    // What hides behind the backward may still take its cycles (CPU ranks).
    data_exposed[s] = exposed + cluster.gpu.overlap_cost * (during - exposed) + after;
    // Everything else after the backward: the optimizer's ops, clipping's norms, the tied
    // embedding's all-reduce, the loss's.
    other[s] = ops_seconds(rest, prices) + groups_seconds(rest, ops, "tp", cluster, false) +
               groups_seconds(rest, ops, "mp", cluster, false) +
               groups_seconds(rest, ops, "embedding", cluster, false) +
               groups_seconds(rest, ops, "world", cluster, false);
    if (stages[s].memory.peak() >= out.memory.peak()) out.memory = stages[s].memory;
    out.memory_gb_per_gpu = static_cast<double>(out.memory.peak()) / 1e9;
  }

  // One activation (or its gradient: the same size) between neighbouring stages: the largest
  // message (the pipeline also sends a few scalars), over the link between the two ranks; the
  // simulator takes one time for every boundary, the slowest's. The executor sends between
  // computes, so sends count in no phase's compute.
  double message = 0;
  for (OpPhase phase : {OpPhase::forward, OpPhase::backward, OpPhase::other})
    for (const auto& [key, totals] : stages.front().ops.counts(phase).collectives)
      if (starts_with(key.first, "pp") && key.second == CollectiveKind::send)
        message = std::max(message, totals.largest);
  const std::vector<int>& pipeline = layout.pp_group(stages.front().rank);
  for (std::size_t s = 0; message > 0 && s + 1 < pipeline.size(); ++s)
    out.pipeline_send_s =
        std::max(out.pipeline_send_s, collective_seconds(CollectiveKind::send, message,
                                                         {pipeline[s], pipeline[s + 1]}, cluster));

  const PipelineSimulation sim = simulate_pipeline_actions(
      pipeline_schedules(p.pipeline_schedule(), layout.pp_size, micro_batches,
                         static_cast<int>(p.virtual_stages)),
      static_cast<int>(p.virtual_stages), out.stage_costs, out.pipeline_send_s);
  TN_CHECK(!sim.deadlocked, "the schedule deadlocked in the simulator: ", sim.deadlock);
  out.pipeline_s = sim.makespan;
  out.bubble_fraction = sim.bubble_fraction;

  std::size_t slowest = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const double end = sim.spans[s].empty() ? 0 : sim.spans[s].back().end;
    const double total = end + data_exposed[s] + other[s];
    if (total >= out.step_time_s) {
      out.step_time_s = total;
      slowest = s;
    }
  }
  out.compute_s = compute[slowest];
  out.tensor_comm_s = tensor[slowest];
  out.data_comm_s = data[slowest];
  out.data_comm_exposed_s = data_exposed[slowest];
  out.optimizer_s = other[slowest];

  const double tokens =
      static_cast<double>(config.training.global_batch_size * config.model.seq_len);
  out.tokens_per_s = tokens / out.step_time_s;
  out.tflops_per_gpu = 3.0 * forward_flops_per_token(config.model) * out.tokens_per_s /
                       layout.world_size / 1e12;
  out.mfu = out.tflops_per_gpu * 1e12 / peak_flops(cluster, bf16);
  return out;
}

}  // namespace ternion
