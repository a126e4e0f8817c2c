// ProcessGroups over real MPI (run by ctest as `mpirun -np 8 test_parallel_mpi`): for several
// layouts of the same 8 ranks, every communicator has the layout's size and this rank's place
// in it, an all-reduce over each group of the members' world ranks gives the closed form (the
// sum of the layout's member list), and the pipeline neighbours receive what their neighbour
// sent. Every check is an EXPECT, never an ASSERT: a rank that returned early from a test
// would leave the others waiting in the next collective.
#include <gtest/gtest.h>

#include "mpi_gtest.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "parallel/comm/mpi_runtime.h"
#include "parallel/process_groups.h"

namespace ternion {
namespace {


struct Layout {
  std::int64_t tp, pp, dp;
};

std::string label(const Layout& l) {
  return "tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) + " dp " +
         std::to_string(l.dp);
}

// All-reduces this rank's world rank over `comm` and compares with the members' sum.
void expect_sum_of_members(Communicator& comm, const std::vector<int>& members, int world_rank,
                           const std::string& what) {
  Tensor value = Tensor::full({1}, static_cast<float>(world_rank));
  comm.all_reduce(value, ReduceOp::Sum);
  const float want = static_cast<float>(std::accumulate(members.begin(), members.end(), 0));
  const float got = value.data<float>()[0];
  EXPECT_EQ(got, want) << what << " " << comm.name() << " on world rank " << world_rank
                       << ": all-reduce sum " << got << ", members " << rank_list_str(members)
                       << " sum to " << want << " (abs diff " << got - want << ")";
}

void expect_place(const Communicator& comm, const std::vector<int>& members, int world_rank,
                  int want_rank, const std::string& what) {
  EXPECT_EQ(comm.size(), static_cast<int>(members.size())) << what << " size, rank " << world_rank;
  EXPECT_EQ(comm.rank(), want_rank) << what << " rank, world rank " << world_rank;
  EXPECT_EQ(comm.name(), what + rank_list_str(members));
}

TEST(ProcessGroupsMpi, EveryGroupOfEveryLayout) {
  Communicator& world = testing_mpi::world();
  ASSERT_EQ(world.size(), 8) << "run under mpirun -np 8";  // the same on every rank
  const int rank = world.rank();
  for (const Layout& l : {Layout{2, 2, 2}, Layout{8, 1, 1}, Layout{1, 8, 1}, Layout{1, 1, 8},
                          Layout{2, 4, 1}, Layout{4, 1, 2}, Layout{1, 4, 2}, Layout{2, 2, 0}}) {
    SCOPED_TRACE(label(l));
    const ProcessGroups groups(world, make_rank_layout(world.size(), l.tp, l.pp, l.dp));
    const RankLayout& layout = groups.layout();
    const RankCoords& c = groups.coords();
    EXPECT_EQ(&groups.world(), &world);
    expect_place(groups.tensor(), layout.tp_group(rank), rank, c.tp_rank, "tp");
    expect_place(groups.data(), layout.dp_group(rank), rank, c.dp_rank, "dp");
    expect_place(groups.pipeline(), layout.pp_group(rank), rank, c.pp_rank, "pp");
    const std::vector<int>& mp = layout.mp_group(rank);
    expect_place(groups.model_parallel(), mp, rank,
                 static_cast<int>(std::find(mp.begin(), mp.end(), rank) - mp.begin()), "mp");

    std::vector<int> everyone(8);
    std::iota(everyone.begin(), everyone.end(), 0);
    expect_sum_of_members(groups.world(), everyone, rank, "world");
    expect_sum_of_members(groups.tensor(), layout.tp_group(rank), rank, "tensor");
    expect_sum_of_members(groups.data(), layout.dp_group(rank), rank, "data");
    expect_sum_of_members(groups.pipeline(), layout.pp_group(rank), rank, "pipeline");
    expect_sum_of_members(groups.model_parallel(), mp, rank, "model parallel");

    const std::vector<int>& embedding = layout.embedding_group(rank);
    EXPECT_EQ(groups.embedding() != nullptr, !embedding.empty()) << "embedding, rank " << rank;
    // Only members call the embedding all-reduce; it spans no other rank, so nobody waits.
    if (groups.embedding() != nullptr) {
      const int place =
          static_cast<int>(std::find(embedding.begin(), embedding.end(), rank) - embedding.begin());
      expect_place(*groups.embedding(), embedding, rank, place, "embedding");
      expect_sum_of_members(*groups.embedding(), embedding, rank, "embedding");
    }

    // All 8 ranks share this machine: one node, no tensor group spans nodes.
    EXPECT_EQ(groups.node_local().size(), 8);
    EXPECT_EQ(groups.node_of_rank(), std::vector<int>(8, 0));

    // Each stage sends its world rank to the next; what arrives names the previous stage.
    std::vector<P2POp> ops;
    Tensor out = Tensor::full({1}, static_cast<float>(rank));
    Tensor in = Tensor::full({1}, -1.0f);
    if (groups.pp_next_rank() >= 0) ops.push_back({P2POp::Kind::Send, out, c.pp_rank + 1, 7});
    if (groups.pp_prev_rank() >= 0) ops.push_back({P2POp::Kind::Recv, in, c.pp_rank - 1, 7});
    if (!ops.empty()) groups.pipeline().exchange(std::move(ops));
    EXPECT_EQ(in.data<float>()[0], static_cast<float>(groups.pp_prev_rank()))
        << "from the previous stage, rank " << rank;
    EXPECT_EQ(groups.is_first_stage(), groups.pp_prev_rank() < 0);
    EXPECT_EQ(groups.is_last_stage(), groups.pp_next_rank() < 0);

    const std::string text = groups.describe();
    EXPECT_NE(text.find("rank " + std::to_string(rank) + " of 8: dp=" + std::to_string(c.dp_rank) +
                        " tp=" + std::to_string(c.tp_rank) + " pp=" + std::to_string(c.pp_rank)),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(groups.tensor().name()), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace ternion

