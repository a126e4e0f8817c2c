// The process groups of one rank: the rank grid of parallel/rank_layout.h made real by
// splitting the world communicator, Megatron-Core style: built once, then passed explicitly
// to whatever needs a group (layers, the pipeline schedule, the gradient reducer). No globals,
// so one test can build several layouts.
//
//   RankLayout layout = make_rank_layout(world->size(), tp, pp, dp);
//   ProcessGroups groups(*world, layout);
//   groups.tensor().all_reduce(partial, ReduceOp::Sum);
//
// Construction is collective over `world`: every rank calls split the same number of times in
// the same order (tensor, data, pipeline, model parallel, embedding, node-local), and then
// one broadcast and one all-gather that find out which node each rank is on. A split's color
// is the smallest global rank of the group (-1 for ranks outside an embedding group) and its
// key the global rank, so each sub-communicator's ranks follow the layout's ascending member
// lists: tensor().rank() == tp_rank, data().rank() == dp_rank, pipeline().rank() == pp_rank.
//
// A tensor group that spans nodes exchanges activations every layer over the network; the
// constructor warns about that on rank 0 (usually a tp larger than the ranks per node).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/rank_layout.h"

namespace ternion {

class ProcessGroups {
 public:
  ProcessGroups(Communicator& world, RankLayout layout);
  // The one-rank layout over a communicator of this process alone
  // (parallel/comm/self_communicator.h): a run on one rank takes the parallel path's one-rank
  // case, so nothing branches on whether groups exist.
  static std::unique_ptr<ProcessGroups> one_rank();
  // Rank `rank` of `layout` alone, its groups made of layout-only communicators
  // (parallel/comm/layout_only_communicator.h) that move no data, every rank on one node: what
  // a rank's memory estimate runs its training step over (training/memory_estimate.h).
  static std::unique_ptr<ProcessGroups> layout_only(const RankLayout& layout, int rank);
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  Communicator& world() const { return world_; }
  Communicator& tensor() const { return *tensor_; }
  Communicator& data() const { return *data_; }
  Communicator& pipeline() const { return *pipeline_; }
  Communicator& model_parallel() const { return *model_parallel_; }
  // Null on the middle pipeline stages, which hold no embedding.
  Communicator* embedding() const { return embedding_.get(); }
  Communicator& node_local() const { return *node_local_; }

  const RankLayout& layout() const { return layout_; }
  const RankPlacement& placement() const { return layout_.at(world_.rank()); }
  const RankCoords& coords() const { return placement().coords; }
  int tp_rank() const { return coords().tp_rank; }
  int dp_rank() const { return coords().dp_rank; }
  int pp_rank() const { return coords().pp_rank; }
  int tp_size() const { return layout_.tp_size; }
  int dp_size() const { return layout_.dp_size; }
  int pp_size() const { return layout_.pp_size; }
  int pp_prev_rank() const { return placement().pp_prev_rank; }  // global; -1 on the first stage
  int pp_next_rank() const { return placement().pp_next_rank; }  // global; -1 on the last stage
  bool is_first_stage() const { return placement().is_first_stage; }
  bool is_last_stage() const { return placement().is_last_stage; }

  // node_of_rank()[r]: the world rank of the first rank on rank r's node.
  const std::vector<int>& node_of_rank() const { return node_of_rank_; }

  // This rank's coordinates, each group's members and this rank's place in it, its pipeline
  // neighbours and its node, one fact per line.
  std::string describe() const;

 private:
  struct LayoutOnlyTag {};
  ProcessGroups(LayoutOnlyTag, std::unique_ptr<Communicator> world, RankLayout layout);
  std::unique_ptr<Communicator> owned_world_;  // one_rank()'s; else the world is the caller's
  Communicator& world_;
  RankLayout layout_;
  std::unique_ptr<Communicator> tensor_;
  std::unique_ptr<Communicator> data_;
  std::unique_ptr<Communicator> pipeline_;
  std::unique_ptr<Communicator> model_parallel_;
  std::unique_ptr<Communicator> embedding_;
  std::unique_ptr<Communicator> node_local_;
  std::vector<int> node_of_rank_;
};

// The tensor groups (member lists) whose members are not all on one node, given the node of
// every rank (node_of_rank[r], any id that is equal for ranks on the same node).
std::vector<std::vector<int>> tensor_groups_spanning_nodes(const RankLayout& layout,
                                                           const std::vector<int>& node_of_rank);
// ConfigError naming the first tensor group that spans nodes: tensor parallelism all-reduces
// activations every layer, so a training run (and its dry run) refuses it. The same on every
// rank.
void check_tensor_groups_within_nodes(const ProcessGroups& groups);

}  // namespace ternion
