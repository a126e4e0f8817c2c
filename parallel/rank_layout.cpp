#include "parallel/rank_layout.h"

#include <climits>
#include <sstream>

#include "framework/error.h"

namespace ternion {

std::int64_t saturating_product(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return INT64_MAX;
  return product;
}

namespace {

void check_sizes(std::int64_t world_size, std::int64_t tp, std::int64_t pp, std::int64_t dp) {
  TN_CHECK_AS(ConfigError, world_size >= 1, "world size must be at least 1, got ", world_size);
  TN_CHECK_AS(ConfigError, world_size <= INT_MAX, "world size ", world_size,
              " is more ranks than an MPI communicator holds");
  TN_CHECK_AS(ConfigError, tp >= 1, "parallel.tensor must be at least 1, got ", tp);
  TN_CHECK_AS(ConfigError, pp >= 1, "parallel.pipeline must be at least 1, got ", pp);
  TN_CHECK_AS(ConfigError, dp >= 0, "parallel.data must be at least 1 (or 0 to derive it), got ",
              dp);
}

}  // namespace

const RankPlacement& RankLayout::at(int rank) const {
  TN_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " outside a world of ", world_size);
  return ranks[static_cast<std::size_t>(rank)];
}

int RankLayout::global_rank(const RankCoords& c) const {
  TN_CHECK(c.tp_rank >= 0 && c.tp_rank < tp_size && c.dp_rank >= 0 && c.dp_rank < dp_size &&
               c.pp_rank >= 0 && c.pp_rank < pp_size,
           "coordinates tp=", c.tp_rank, " dp=", c.dp_rank, " pp=", c.pp_rank, " outside ", tp_size,
           "x", dp_size, "x", pp_size);
  return c.pp_rank * (dp_size * tp_size) + c.dp_rank * tp_size + c.tp_rank;
}

const std::vector<int>& RankLayout::tp_group(int rank) const {
  return tp_groups[static_cast<std::size_t>(at(rank).tp_group_index)];
}
const std::vector<int>& RankLayout::dp_group(int rank) const {
  return dp_groups[static_cast<std::size_t>(at(rank).dp_group_index)];
}
const std::vector<int>& RankLayout::pp_group(int rank) const {
  return pp_groups[static_cast<std::size_t>(at(rank).pp_group_index)];
}
const std::vector<int>& RankLayout::mp_group(int rank) const {
  return mp_groups[static_cast<std::size_t>(at(rank).mp_group_index)];
}
const std::vector<int>& RankLayout::embedding_group(int rank) const {
  static const std::vector<int> kNone;
  const RankPlacement& p = at(rank);
  return p.in_embedding_group ? embedding_groups[static_cast<std::size_t>(p.pp_group_index)]
                              : kNone;
}

RankLayout make_rank_layout(std::int64_t world_size, std::int64_t tp, std::int64_t pp,
                            std::int64_t dp) {
  check_sizes(world_size, tp, pp, dp);
  const std::int64_t model_parallel = saturating_product(tp, pp);
  if (dp == 0) {
    TN_CHECK_AS(ConfigError, world_size % model_parallel == 0, "world size ", world_size,
                " is not a multiple of parallel.tensor (", tp, ") x parallel.pipeline (", pp,
                ") = ", model_parallel,
                ", so parallel.data = 0 cannot derive a data-parallel size");
    dp = world_size / model_parallel;
  }
  const std::int64_t product = saturating_product(model_parallel, dp);
  TN_CHECK_AS(ConfigError, product == world_size, "world size ", world_size,
              " is not parallel.tensor (", tp, ") x parallel.pipeline (", pp, ") x parallel.data (",
              dp, ") = ", product);

  RankLayout layout;
  layout.world_size = static_cast<int>(world_size);
  const int tp_size = layout.tp_size = static_cast<int>(tp);
  const int pp_size = layout.pp_size = static_cast<int>(pp);
  const int dp_size = layout.dp_size = static_cast<int>(dp);

  // Each group is the ranks whose coordinates agree in all but the group's own dimension(s);
  // walking those in order gives ascending global ranks, as the rank grows with each of them.
  // Group indices: tp: the rank's other coordinates (pp_rank, dp_rank); dp: (pp_rank,
  // tp_rank); pp and embedding: (dp_rank, tp_rank); mp: dp_rank.
  RankCoords c;
  for (c.pp_rank = 0; c.pp_rank < pp_size; ++c.pp_rank)
    for (c.dp_rank = 0; c.dp_rank < dp_size; ++c.dp_rank) {
      std::vector<int>& group = layout.tp_groups.emplace_back();
      for (c.tp_rank = 0; c.tp_rank < tp_size; ++c.tp_rank) group.push_back(layout.global_rank(c));
    }
  for (c.pp_rank = 0; c.pp_rank < pp_size; ++c.pp_rank)
    for (c.tp_rank = 0; c.tp_rank < tp_size; ++c.tp_rank) {
      std::vector<int>& group = layout.dp_groups.emplace_back();
      for (c.dp_rank = 0; c.dp_rank < dp_size; ++c.dp_rank) group.push_back(layout.global_rank(c));
    }
  for (c.dp_rank = 0; c.dp_rank < dp_size; ++c.dp_rank)
    for (c.tp_rank = 0; c.tp_rank < tp_size; ++c.tp_rank) {
      std::vector<int>& group = layout.pp_groups.emplace_back();
      for (c.pp_rank = 0; c.pp_rank < pp_size; ++c.pp_rank) group.push_back(layout.global_rank(c));
      std::vector<int>& embedding = layout.embedding_groups.emplace_back();
      embedding.push_back(group.front());
      if (pp_size > 1) embedding.push_back(group.back());
    }
  for (c.dp_rank = 0; c.dp_rank < dp_size; ++c.dp_rank) {
    std::vector<int>& group = layout.mp_groups.emplace_back();
    for (c.pp_rank = 0; c.pp_rank < pp_size; ++c.pp_rank)
      for (c.tp_rank = 0; c.tp_rank < tp_size; ++c.tp_rank) group.push_back(layout.global_rank(c));
  }

  layout.ranks.resize(static_cast<std::size_t>(world_size));
  for (int rank = 0; rank < layout.world_size; ++rank) {
    RankPlacement& p = layout.ranks[static_cast<std::size_t>(rank)];
    p.coords.tp_rank = rank % tp_size;
    p.coords.dp_rank = rank / tp_size % dp_size;
    p.coords.pp_rank = rank / (tp_size * dp_size);
    p.tp_group_index = rank / tp_size;
    p.dp_group_index = p.coords.pp_rank * tp_size + p.coords.tp_rank;
    p.pp_group_index = p.coords.dp_rank * tp_size + p.coords.tp_rank;
    p.mp_group_index = p.coords.dp_rank;
    p.is_first_stage = p.coords.pp_rank == 0;
    p.is_last_stage = p.coords.pp_rank == pp_size - 1;
    p.in_embedding_group = p.is_first_stage || p.is_last_stage;
    const std::vector<int>& stages = layout.pp_groups[static_cast<std::size_t>(p.pp_group_index)];
    if (!p.is_first_stage) p.pp_prev_rank = stages[static_cast<std::size_t>(p.coords.pp_rank - 1)];
    if (!p.is_last_stage) p.pp_next_rank = stages[static_cast<std::size_t>(p.coords.pp_rank + 1)];
  }
  return layout;
}

std::string rank_list_str(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < ranks.size(); ++i) out << (i ? "," : "") << ranks[i];
  out << ']';
  return out.str();
}

std::string layout_line(const RankLayout& layout, int rank) {
  const RankCoords& c = layout.at(rank).coords;
  std::ostringstream out;
  out << "rank " << rank << ": dp=" << c.dp_rank << " tp=" << c.tp_rank << " pp=" << c.pp_rank
      << " tp_group=" << rank_list_str(layout.tp_group(rank))
      << " dp_group=" << rank_list_str(layout.dp_group(rank))
      << " pp_group=" << rank_list_str(layout.pp_group(rank));
  return out.str();
}

}  // namespace ternion
