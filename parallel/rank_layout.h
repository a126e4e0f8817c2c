// The rank grid of a hybrid data / tensor / pipeline parallel job, as a pure function of the
// sizes (no MPI), so every layout can be unit-tested and printed before a job starts.
//
// Megatron's order, tensor rank fastest, then data, then pipeline:
//
//   rank = pp_rank * (dp_size * tp_size) + dp_rank * tp_size + tp_rank
//
// so a tensor group (the ranks that exchange activations every layer) is tp_size consecutive
// ranks, which mpirun places on one node; the data groups come next and the pipeline stages,
// whose traffic is one activation per micro-batch, are the farthest apart.
//
// Groups of a rank, each a list of global ranks in ascending order:
//   tp_group        same dp_rank and pp_rank             (tp_size ranks)
//   dp_group        same tp_rank and pp_rank             (dp_size ranks)
//   pp_group        same tp_rank and dp_rank             (pp_size ranks, stage order)
//   mp_group        model parallel: same dp_rank         (tp_size * pp_size ranks): one replica
//   embedding_group the first and last stage of its pp_group, which both hold the tied token
//                   embedding and reduce its gradient together; one rank when pp_size == 1;
//                   empty on the middle stages (they are not members)
//
// Pipeline neighbours do not wrap (unlike Megatron's get_pipeline_model_parallel_next_rank):
// pp_prev_rank is -1 on the first stage and pp_next_rank is -1 on the last, because a
// schedule never sends past either end, and -1 makes a send that tries fail loudly instead of
// reaching stage 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ternion {

struct RankCoords {
  int tp_rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
};

// Everything one rank needs to know about its place in the grid, computed once. Its groups'
// member lists are held once per group by the RankLayout (RankLayout::tp_group(rank) ...), so
// a layout of W ranks takes O(W) memory, not O(W x group size).
struct RankPlacement {
  RankCoords coords;
  int pp_prev_rank = -1;  // global rank of the previous stage; -1 on the first
  int pp_next_rank = -1;  // global rank of the next stage; -1 on the last
  bool is_first_stage = true;
  bool is_last_stage = true;
  bool in_embedding_group = true;  // false on the middle stages
  // Indices into RankLayout's group lists.
  int tp_group_index = 0, dp_group_index = 0, pp_group_index = 0, mp_group_index = 0;
};

struct RankLayout {
  int world_size = 1;
  int tp_size = 1;
  int pp_size = 1;
  int dp_size = 1;
  std::vector<RankPlacement> ranks;  // indexed by global rank

  // Every group of each kind once; together the groups of one kind partition the world
  // (embedding groups excepted: they leave out the middle stages).
  std::vector<std::vector<int>> tp_groups, dp_groups, pp_groups, mp_groups, embedding_groups;

  const RankPlacement& at(int rank) const;
  int global_rank(const RankCoords& coords) const;
  const std::vector<int>& tp_group(int rank) const;
  const std::vector<int>& dp_group(int rank) const;
  const std::vector<int>& pp_group(int rank) const;
  const std::vector<int>& mp_group(int rank) const;
  const std::vector<int>& embedding_group(int rank) const;  // empty on the middle stages
};

// The layout of `world_size` ranks into tp x pp x dp (dp == 0: world_size / (tp * pp)).
// ConfigError when a size is below 1, when dp == 0 and tp * pp does not divide the world, or
// when tp * pp * dp is not the world size:
//   "world size 6 is not parallel.tensor (2) x parallel.pipeline (2) x parallel.data (2) = 8"
RankLayout make_rank_layout(std::int64_t world_size, std::int64_t tp, std::int64_t pp,
                            std::int64_t dp);

// a * b, or INT64_MAX where that overflows (sizes a config asks for may be anything).
std::int64_t saturating_product(std::int64_t a, std::int64_t b);

// "rank R: dp=D tp=T pp=P tp_group=[a,b] dp_group=[..] pp_group=[..]"
std::string layout_line(const RankLayout& layout, int rank);

// "[0,1,2]"
std::string rank_list_str(const std::vector<int>& ranks);

}  // namespace ternion
