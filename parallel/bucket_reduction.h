// How one gradient bucket travels over the data-parallel group: the gradient reducer's seam
// for topology and compression (parallel/gradient_reducer.h decides when, this decides how).
//
// StagedReduction: the reducer's collectives over one or two levels of the group.
//   flat          the data group's own all-reduce / reduce-scatter.
//   hierarchical  where the data group spans N nodes with L of its ranks on each: a bucket is
//                 reduce-scattered inside each node (shared memory), this rank's 1/L share is
//                 all-reduced across the nodes (each of the L ranks of a node on its own
//                 share, so the inter-node links carry 1/L of the bucket each, in parallel),
//                 then all-gathered inside the node. Under ZeRO the reduce-scatter goes across
//                 the nodes too (no all-gather), so this rank keeps chunk l * N + n of the
//                 bucket (l its place in its node, n its node's place among the nodes), not
//                 chunk data_rank; shard_index() says which.
// PowerSgdReduction (parallel/powersgd_reduction.h) compresses instead.
// Wire types:
//   f32   exact sums (in the collective's own order).
//   bf16  half the bytes. A reduce-scatter sends each rank's contribution to every other
//         rank's chunk rounded to bf16 once (an all-to-all); the chunk's owner adds the ones it
//         receives to its own, unrounded, in f32, in rank order. An all-reduce then rounds each
//         owner's sum to bf16 once and all-gathers it, and every rank, the owner too, takes
//         the rounded sums, so the replicas stay identical. Hierarchical: the node's partial
//         sums are rounded once more when they cross nodes. Nothing else rounds; parameters
//         (ZeRO's all-gather of updated values) always travel in f32.
//
// Every operation returns at once; the stages after the first run as earlier ones complete
// (parallel/collective_chain.h), driven by progress(), which the reducer calls as each
// layer's backward ends, and by the handles.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "parallel/collective_chain.h"
#include "parallel/comm/communicator.h"

namespace ternion {

class ProcessGroups;

// One parameter's gradient in a bucket: where it starts in the bucket, and its shape.
struct BucketMember {
  std::string name;
  Shape shape;
  std::int64_t offset = 0;
};

class BucketReduction {
 public:
  virtual ~BucketReduction() = default;
  // The reducer's buckets, once planned (a compression keeps state per parameter).
  virtual void plan(const std::vector<std::vector<BucketMember>>& /*buckets*/) {}
  // Ranks in the data group: a bucket is cut into this many equal chunks.
  virtual int size() const = 0;
  // The chunk of each bucket this rank keeps under ZeRO.
  virtual int shard_index() const = 0;
  // Sums over the group of bucket `bucket`'s gradient `whole`, in place.
  virtual WorkHandle all_reduce(std::size_t bucket, Tensor& whole) = 0;
  // shard = chunk shard_index() of the sum over the group of `whole`.
  virtual WorkHandle reduce_scatter(std::size_t bucket, Tensor& shard, const Tensor& whole) = 0;
  // Parameter values: every rank's chunk shard_index() of `whole` to every rank, exactly.
  // `shard` is this rank's chunk of `whole`.
  virtual WorkHandle all_gather(Tensor& whole, const Tensor& shard) = 0;
  // Starts the stages whose predecessors completed (never blocks).
  virtual void progress() {}
  // One line for the log: "flat over dp[0,1,2,3], f32 on the wire".
  virtual std::string describe() const = 0;

  // What a checkpoint must keep for a resumed run to reduce as the uninterrupted one would, by
  // name (PowerSGD's residuals and Q): views a load may copy into, made on `device` if not yet
  // made. Empty where the reduction keeps nothing from step to step.
  virtual std::vector<std::pair<std::string, Tensor>> state(Device /*device*/) { return {}; }
  // A resumed run: `steps` steps have reduced (PowerSGD's warm-up counts them).
  virtual void resume_after(std::int64_t /*steps*/) {}
};

enum class GradReduceMode { Flat, Hierarchical, Auto };
GradReduceMode parse_grad_reduce_mode(const std::string& text);  // flat | hierarchical | auto
enum class WireType { F32, BF16 };
WireType parse_wire_type(const std::string& text);  // fp32 | bf16

// Whether a data group reduces hierarchically, from its members' nodes: pure, the same on
// every rank.
struct GradReducePlan {
  bool hierarchical = false;
  int nodes = 1, ranks_per_node = 1;  // of the data group, when hierarchical
  std::string why;                    // when `Hierarchical` was asked for and falls back to flat
  // Where the group's member `position` (its data rank) goes: its node's group (all members on
  // that node) and its place's group (the members at the same place on every node). Members
  // are global ranks, each list ascending by data rank.
  std::vector<int> node_group, across_group;
};
// `members`: the data group's global ranks in data-rank order; `node_of_rank[r]`: any id equal
// for ranks on the same node; `position`: this rank's data rank. Hierarchical needs at least
// two nodes with the same number (at least two) of the group's ranks on each; `Auto` chooses it
// then, `Hierarchical` falls back to flat otherwise (saying why), `Flat` never chooses it.
GradReducePlan plan_grad_reduce(GradReduceMode mode, const std::vector<int>& members,
                                const std::vector<int>& node_of_rank, int position);

// One or two levels (the group itself; or inside the node, then across the nodes). Collective
// over the data group when it splits (hierarchical, or a bf16 wire: a second communicator per
// level carries the gathers, so they never queue behind the next bucket's scatter). Flat, the
// first stage runs on `data` itself, which the trainer also uses: safe because a chain's first
// stage on it is never held back, so it starts when submitted, in program order on every rank.
class StagedReduction final : public BucketReduction {
 public:
  // Flat over `data` (hierarchical when `plan` says so: `data` is split by it).
  StagedReduction(Communicator& data, const GradReducePlan& plan, WireType wire);
  int size() const override { return size_; }
  int shard_index() const override { return shard_index_; }
  WorkHandle all_reduce(std::size_t bucket, Tensor& whole) override;
  WorkHandle reduce_scatter(std::size_t bucket, Tensor& shard, const Tensor& whole) override;
  WorkHandle all_gather(Tensor& whole, const Tensor& shard) override;
  void progress() override { chains_.progress(); }
  std::string describe() const override;

 private:
  struct Level {
    Communicator* scatter = nullptr;  // reduce-scatters and all-reduces
    Communicator* gather = nullptr;   // all-gathers
  };
  // Stages that leave chunk `rank` of the sum over `level` of `in` in `out`, and that
  // all-gather `in` (this rank's chunk of `out`) into `out`.
  void scatter_stages(const Level& level, const Tensor& in, const Tensor& out,
                      std::vector<ChainStage>& stages) const;
  void gather_stages(const Level& level, const Tensor& in, const Tensor& out, bool rounded,
                     std::vector<ChainStage>& stages) const;

  WireType wire_;
  std::vector<Level> levels_;  // innermost first
  std::vector<std::unique_ptr<Communicator>> owned_;
  int size_ = 1, shard_index_ = 0;
  std::string description_;
  CollectiveChains chains_;
};

}  // namespace ternion
