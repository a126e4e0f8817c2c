// make_rank_layout against a brute-force reference: for every (world, tp, pp, dp) tried, each
// rank's coordinates follow rank = pp * (dp * tp) + dp * tp + tp, and each group is exactly the
// ranks whose coordinates agree with it outside the group's own dimension(s).
#include "parallel/rank_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "framework/error.h"

namespace ternion {
namespace {

struct Case {
  std::int64_t world, tp, pp, dp;
};

std::string label(const Case& c) {
  return "world " + std::to_string(c.world) + " tp " + std::to_string(c.tp) + " pp " +
         std::to_string(c.pp) + " dp " + std::to_string(c.dp);
}

// Every (tp, pp) dividing the world, with dp derived (0) and explicit.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (std::int64_t world : {1, 2, 3, 4, 6, 8, 12, 16, 24})
    for (std::int64_t tp = 1; tp <= world; ++tp)
      for (std::int64_t pp = 1; tp * pp <= world; ++pp)
        if (world % (tp * pp) == 0) {
          cases.push_back({world, tp, pp, 0});
          cases.push_back({world, tp, pp, world / (tp * pp)});
        }
  return cases;
}

// The reference: coordinates by decomposing the rank, groups by filtering all ranks.
RankCoords reference_coords(int rank, int tp, int dp) {
  return {rank % tp, (rank / tp) % dp, rank / (tp * dp)};
}

template <class SameGroup>
std::vector<int> reference_group(int rank, int world, int tp, int dp, SameGroup same) {
  const RankCoords mine = reference_coords(rank, tp, dp);
  std::vector<int> members;
  for (int q = 0; q < world; ++q)
    if (same(mine, reference_coords(q, tp, dp))) members.push_back(q);
  return members;
}

// Each rank is in exactly one group of the list, and the groups cover the world.
void expect_partition(const std::vector<std::vector<int>>& groups, int world,
                      const std::string& what) {
  std::vector<int> seen(static_cast<std::size_t>(world), 0);
  for (const auto& group : groups) {
    EXPECT_TRUE(std::is_sorted(group.begin(), group.end())) << what << " " << rank_list_str(group);
    for (int r : group) {
      ASSERT_TRUE(r >= 0 && r < world) << what << ": rank " << r;
      ++seen[static_cast<std::size_t>(r)];
    }
  }
  for (int r = 0; r < world; ++r)
    EXPECT_EQ(seen[static_cast<std::size_t>(r)], 1)
        << what << ": rank " << r << " appears " << seen[static_cast<std::size_t>(r)] << " times";
}

TEST(RankLayout, EveryLayoutMatchesTheReference) {
  const std::vector<Case> cases = all_cases();
  ASSERT_GT(cases.size(), 60u);
  for (const Case& c : cases) {
    SCOPED_TRACE(label(c));
    const RankLayout layout = make_rank_layout(c.world, c.tp, c.pp, c.dp);
    const int world = static_cast<int>(c.world), tp = static_cast<int>(c.tp),
              pp = static_cast<int>(c.pp);
    const int dp = world / (tp * pp);
    ASSERT_EQ(layout.world_size, world);
    ASSERT_EQ(layout.tp_size, tp);
    ASSERT_EQ(layout.pp_size, pp);
    ASSERT_EQ(layout.dp_size, dp);
    ASSERT_EQ(static_cast<int>(layout.ranks.size()), world);

    expect_partition(layout.tp_groups, world, "tp groups");
    expect_partition(layout.dp_groups, world, "dp groups");
    expect_partition(layout.pp_groups, world, "pp groups");
    expect_partition(layout.mp_groups, world, "mp groups");
    EXPECT_EQ(static_cast<int>(layout.tp_groups.size()), dp * pp);
    EXPECT_EQ(static_cast<int>(layout.dp_groups.size()), tp * pp);
    EXPECT_EQ(static_cast<int>(layout.pp_groups.size()), tp * dp);
    EXPECT_EQ(static_cast<int>(layout.mp_groups.size()), dp);

    for (int r = 0; r < world; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const RankPlacement& p = layout.at(r);
      const RankCoords want = reference_coords(r, tp, dp);
      EXPECT_EQ(p.coords.tp_rank, want.tp_rank);
      EXPECT_EQ(p.coords.dp_rank, want.dp_rank);
      EXPECT_EQ(p.coords.pp_rank, want.pp_rank);
      EXPECT_EQ(p.coords.pp_rank * (dp * tp) + p.coords.dp_rank * tp + p.coords.tp_rank, r);
      EXPECT_EQ(layout.global_rank(p.coords), r);

      const auto same_tp = [](RankCoords a, RankCoords b) {
        return a.dp_rank == b.dp_rank && a.pp_rank == b.pp_rank;
      };
      const auto same_dp = [](RankCoords a, RankCoords b) {
        return a.tp_rank == b.tp_rank && a.pp_rank == b.pp_rank;
      };
      const auto same_pp = [](RankCoords a, RankCoords b) {
        return a.tp_rank == b.tp_rank && a.dp_rank == b.dp_rank;
      };
      const auto same_mp = [](RankCoords a, RankCoords b) { return a.dp_rank == b.dp_rank; };
      EXPECT_EQ(layout.tp_group(r), reference_group(r, world, tp, dp, same_tp));
      EXPECT_EQ(layout.dp_group(r), reference_group(r, world, tp, dp, same_dp));
      EXPECT_EQ(layout.pp_group(r), reference_group(r, world, tp, dp, same_pp));
      EXPECT_EQ(layout.mp_group(r), reference_group(r, world, tp, dp, same_mp));

      // A tensor group is tp consecutive ranks, and a rank's place in each group is its
      // coordinate along the group's dimension.
      const std::vector<int>& tp_group = layout.tp_group(r);
      ASSERT_EQ(static_cast<int>(tp_group.size()), tp);
      for (int i = 0; i < tp; ++i)
        EXPECT_EQ(tp_group[static_cast<std::size_t>(i)], r - want.tp_rank + i);
      EXPECT_EQ(layout.dp_group(r)[static_cast<std::size_t>(want.dp_rank)], r);
      EXPECT_EQ(layout.pp_group(r)[static_cast<std::size_t>(want.pp_rank)], r);

      EXPECT_EQ(p.is_first_stage, want.pp_rank == 0);
      EXPECT_EQ(p.is_last_stage, want.pp_rank == pp - 1);
      EXPECT_EQ(p.pp_prev_rank, want.pp_rank > 0 ? r - dp * tp : -1);
      EXPECT_EQ(p.pp_next_rank, want.pp_rank < pp - 1 ? r + dp * tp : -1);

      std::vector<int> want_embedding;
      const std::vector<int>& stages = layout.pp_group(r);
      if (want.pp_rank == 0 || want.pp_rank == pp - 1) {
        want_embedding.push_back(stages.front());
        if (pp > 1) want_embedding.push_back(stages.back());
      }
      EXPECT_EQ(layout.embedding_group(r), want_embedding);
      EXPECT_EQ(p.in_embedding_group, !want_embedding.empty());
    }
  }
}

TEST(RankLayout, LinesOfTheTwoByTwoByTwoLayout) {
  const RankLayout layout = make_rank_layout(8, 2, 2, 2);
  const std::vector<std::string> expected = {
      "rank 0: dp=0 tp=0 pp=0 tp_group=[0,1] dp_group=[0,2] pp_group=[0,4]",
      "rank 1: dp=0 tp=1 pp=0 tp_group=[0,1] dp_group=[1,3] pp_group=[1,5]",
      "rank 2: dp=1 tp=0 pp=0 tp_group=[2,3] dp_group=[0,2] pp_group=[2,6]",
      "rank 3: dp=1 tp=1 pp=0 tp_group=[2,3] dp_group=[1,3] pp_group=[3,7]",
      "rank 4: dp=0 tp=0 pp=1 tp_group=[4,5] dp_group=[4,6] pp_group=[0,4]",
      "rank 5: dp=0 tp=1 pp=1 tp_group=[4,5] dp_group=[5,7] pp_group=[1,5]",
      "rank 6: dp=1 tp=0 pp=1 tp_group=[6,7] dp_group=[4,6] pp_group=[2,6]",
      "rank 7: dp=1 tp=1 pp=1 tp_group=[6,7] dp_group=[5,7] pp_group=[3,7]",
  };
  for (int r = 0; r < 8; ++r)
    EXPECT_EQ(layout_line(layout, r), expected[static_cast<std::size_t>(r)]);
  EXPECT_EQ(layout.mp_group(5), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(layout.embedding_group(6), (std::vector<int>{2, 6}));
  EXPECT_EQ(layout.at(3).pp_next_rank, 7);
  EXPECT_EQ(layout.at(7).pp_prev_rank, 3);
}

TEST(RankLayout, MiddleStagesHoldNoEmbedding) {
  const RankLayout layout = make_rank_layout(8, 1, 4, 2);  // stages of pp group [0,2,4,6]
  EXPECT_EQ(layout.embedding_group(0), (std::vector<int>{0, 6}));
  EXPECT_TRUE(layout.embedding_group(2).empty());
  EXPECT_TRUE(layout.embedding_group(5).empty());
  EXPECT_EQ(layout.embedding_group(7), (std::vector<int>{1, 7}));
  EXPECT_EQ(layout.at(4).pp_prev_rank, 2);
  EXPECT_EQ(layout.at(4).pp_next_rank, 6);
  EXPECT_FALSE(layout.at(4).is_first_stage || layout.at(4).is_last_stage);
  EXPECT_EQ(layout_line(layout, 5),
            "rank 5: dp=1 tp=0 pp=2 tp_group=[5] dp_group=[4,5] pp_group=[1,3,5,7]");
}

std::string error_of(std::int64_t world, std::int64_t tp, std::int64_t pp, std::int64_t dp) {
  try {
    make_rank_layout(world, tp, pp, dp);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RankLayout, BadLayoutsAreRefusedWithTheSizes) {
  EXPECT_EQ(
      error_of(6, 2, 2, 2),
      "world size 6 is not parallel.tensor (2) x parallel.pipeline (2) x parallel.data (2) = 8");
  EXPECT_EQ(
      error_of(8, 2, 2, 1),
      "world size 8 is not parallel.tensor (2) x parallel.pipeline (2) x parallel.data (1) = 4");
  EXPECT_EQ(
      error_of(1, 2, 1, 1),
      "world size 1 is not parallel.tensor (2) x parallel.pipeline (1) x parallel.data (1) = 2");
  EXPECT_EQ(error_of(6, 4, 1, 0),
            "world size 6 is not a multiple of parallel.tensor (4) x parallel.pipeline (1) = 4, so "
            "parallel.data = 0 cannot derive a data-parallel size");
  EXPECT_EQ(error_of(8, 0, 1, 1), "parallel.tensor must be at least 1, got 0");
  EXPECT_EQ(error_of(8, 1, -2, 1), "parallel.pipeline must be at least 1, got -2");
  EXPECT_EQ(error_of(8, 1, 1, -1), "parallel.data must be at least 1 (or 0 to derive it), got -1");
  EXPECT_EQ(error_of(0, 1, 1, 1), "world size must be at least 1, got 0");
  // Sizes whose product overflows are refused, not wrapped around into a match.
  const std::string huge = error_of(8, std::int64_t{1} << 62, 4, 1);
  EXPECT_NE(huge.find("world size 8 is not parallel.tensor"), std::string::npos) << huge;
}

}  // namespace
}  // namespace ternion
