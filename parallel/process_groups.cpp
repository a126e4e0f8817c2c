#include "parallel/process_groups.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "framework/logging.h"
#include "parallel/comm/layout_only_communicator.h"
#include "parallel/comm/self_communicator.h"

namespace ternion {

namespace {

// Floats carry the node ids through the collectives (the one dtype every backend moves);
// integers up to 2^24 are exact in them.
constexpr int kMaxRanksForFloatIds = 1 << 24;

// Splits `world` into the groups given by each rank's member list (`members` is this rank's;
// empty = not a member). Every rank calls this, member or not.
std::unique_ptr<Communicator> split_by_members(Communicator& world, const std::vector<int>& members,
                                               const std::string& prefix) {
  const int color = members.empty() ? -1 : members.front();
  return world.split(color, world.rank(), prefix + rank_list_str(members));
}

void check_group(const Communicator* comm, const std::vector<int>& members, int world_rank,
                 const char* kind) {
  if (members.empty()) {
    TN_CHECK(comm == nullptr, kind, " group: rank ", world_rank, " is not a member but got one");
    return;
  }
  TN_CHECK(comm != nullptr, kind, " group: rank ", world_rank, " got no communicator");
  const auto position = std::find(members.begin(), members.end(), world_rank) - members.begin();
  TN_CHECK(comm->size() == static_cast<int>(members.size()) && comm->rank() == position, kind,
           " group ", comm->name(), ": rank ", comm->rank(), " of ", comm->size(),
           ", the layout says ", position, " of ", members.size());
}

std::string group_line(const char* kind, const Communicator* comm) {
  std::ostringstream out;
  out << "  " << kind << ' ';
  if (comm == nullptr) {
    out << "none (a middle pipeline stage holds no embedding)";
  } else {
    out << comm->name() << ", rank " << comm->rank() << " of " << comm->size();
  }
  return out.str();
}

}  // namespace

std::unique_ptr<ProcessGroups> ProcessGroups::one_rank() {
  auto world = std::make_unique<SelfCommunicator>("world");
  auto groups = std::make_unique<ProcessGroups>(*world, make_rank_layout(1, 1, 1, 1));
  groups->owned_world_ = std::move(world);
  return groups;
}

std::unique_ptr<ProcessGroups> ProcessGroups::layout_only(const RankLayout& layout, int rank) {
  TN_CHECK(rank >= 0 && rank < layout.world_size, "rank ", rank, " of a layout of ",
           layout.world_size);
  std::vector<int> everyone(static_cast<std::size_t>(layout.world_size));
  std::iota(everyone.begin(), everyone.end(), 0);
  auto world = std::make_unique<LayoutOnlyCommunicator>(rank, layout.world_size, "world", everyone);
  return std::unique_ptr<ProcessGroups>(
      new ProcessGroups(LayoutOnlyTag{}, std::move(world), layout));
}

ProcessGroups::ProcessGroups(LayoutOnlyTag, std::unique_ptr<Communicator> world,
                             RankLayout layout)
    : owned_world_(std::move(world)), world_(*owned_world_), layout_(std::move(layout)) {
  const int rank = world_.rank();
  const auto group = [rank](const std::vector<int>& members,
                            const std::string& prefix) -> std::unique_ptr<Communicator> {
    if (members.empty()) return nullptr;
    const auto position = std::find(members.begin(), members.end(), rank) - members.begin();
    return std::make_unique<LayoutOnlyCommunicator>(static_cast<int>(position),
                                                    static_cast<int>(members.size()),
                                                    prefix + rank_list_str(members), members);
  };
  tensor_ = group(layout_.tp_group(rank), "tp");
  data_ = group(layout_.dp_group(rank), "dp");
  pipeline_ = group(layout_.pp_group(rank), "pp");
  model_parallel_ = group(layout_.mp_group(rank), "mp");
  embedding_ = group(layout_.embedding_group(rank), "embedding");
  node_local_ = std::make_unique<LayoutOnlyCommunicator>(rank, layout_.world_size, "node");
  node_of_rank_.assign(static_cast<std::size_t>(layout_.world_size), 0);
}

ProcessGroups::ProcessGroups(Communicator& world, RankLayout layout)
    : world_(world), layout_(std::move(layout)) {
  TN_CHECK(world_.size() == layout_.world_size, "a layout of ", layout_.world_size,
           " ranks for a world of ", world_.size());
  TN_CHECK(world_.size() < kMaxRanksForFloatIds, world_.size(), " ranks");
  const int rank = world_.rank();
  tensor_ = split_by_members(world_, layout_.tp_group(rank), "tp");
  data_ = split_by_members(world_, layout_.dp_group(rank), "dp");
  pipeline_ = split_by_members(world_, layout_.pp_group(rank), "pp");
  model_parallel_ = split_by_members(world_, layout_.mp_group(rank), "mp");
  embedding_ = split_by_members(world_, layout_.embedding_group(rank), "embedding");
  node_local_ = world_.split_node_local("node");
  check_group(tensor_.get(), layout_.tp_group(rank), rank, "tensor");
  check_group(data_.get(), layout_.dp_group(rank), rank, "data");
  check_group(pipeline_.get(), layout_.pp_group(rank), rank, "pipeline");
  check_group(model_parallel_.get(), layout_.mp_group(rank), rank, "model-parallel");
  check_group(embedding_.get(), layout_.embedding_group(rank), rank, "embedding");

  // A node's id is the world rank of its node-local rank 0.
  Tensor node_id = Tensor::full({1}, static_cast<float>(rank));
  node_local_->broadcast(node_id, 0);
  Tensor all_ids = Tensor::empty({world_.size()});
  world_.all_gather(all_ids, node_id);
  const float* ids = all_ids.data<float>();
  node_of_rank_.assign(ids, ids + world_.size());

  const std::vector<std::vector<int>> spanning =
      tensor_groups_spanning_nodes(layout_, node_of_rank_);
  if (rank == 0 && !spanning.empty()) {
    std::vector<int> nodes;
    for (int member : spanning.front())
      nodes.push_back(node_of_rank_[static_cast<std::size_t>(member)]);
    log_line(detail::concat(
        "ternion: warning: ", spanning.size(), " of ", layout_.world_size / layout_.tp_size,
        " tensor groups span nodes, e.g. tp_group=", rank_list_str(spanning.front()), " on nodes ",
        rank_list_str(nodes),
        " (a node named by its first rank); tensor parallelism all-reduces activations every "
        "layer, so give each node a multiple of parallel.tensor ranks"));
  }
}

std::string ProcessGroups::describe() const {
  const RankPlacement& p = placement();
  std::ostringstream out;
  out << "rank " << world_.rank() << " of " << world_.size() << ": dp=" << p.coords.dp_rank
      << " tp=" << p.coords.tp_rank << " pp=" << p.coords.pp_rank << " (layout tp " << tp_size()
      << " x pp " << pp_size() << " x dp " << dp_size() << ")\n";
  out << group_line("tensor        ", tensor_.get()) << '\n';
  out << group_line("data          ", data_.get()) << '\n';
  out << group_line("pipeline      ", pipeline_.get()) << ", previous stage "
      << (p.pp_prev_rank < 0 ? std::string("none") : std::to_string(p.pp_prev_rank))
      << ", next stage "
      << (p.pp_next_rank < 0 ? std::string("none") : std::to_string(p.pp_next_rank))
      << (p.is_first_stage ? ", first stage" : "") << (p.is_last_stage ? ", last stage" : "")
      << '\n';
  out << group_line("model parallel", model_parallel_.get()) << '\n';
  out << group_line("embedding     ", embedding_.get()) << '\n';
  out << group_line("node          ", node_local_.get()) << ", node of rank "
      << node_of_rank_[static_cast<std::size_t>(world_.rank())] << '\n';
  return out.str();
}

std::vector<std::vector<int>> tensor_groups_spanning_nodes(const RankLayout& layout,
                                                           const std::vector<int>& node_of_rank) {
  TN_CHECK(static_cast<int>(node_of_rank.size()) == layout.world_size, node_of_rank.size(),
           " node ids for ", layout.world_size, " ranks");
  std::vector<std::vector<int>> spanning;
  for (const std::vector<int>& group : layout.tp_groups) {
    std::set<int> nodes;
    for (int member : group) nodes.insert(node_of_rank[static_cast<std::size_t>(member)]);
    if (nodes.size() > 1) spanning.push_back(group);
  }
  return spanning;
}

void check_tensor_groups_within_nodes(const ProcessGroups& groups) {
  const std::vector<std::vector<int>> spanning =
      tensor_groups_spanning_nodes(groups.layout(), groups.node_of_rank());
  TN_CHECK_AS(ConfigError, spanning.empty(), "parallel.tensor = ", groups.tp_size(),
              ": tensor group ",
              rank_list_str(spanning.empty() ? std::vector<int>{} : spanning.front()),
              " spans nodes; tensor parallelism all-reduces activations every layer, so each "
              "node's ranks must be a multiple of parallel.tensor");
}

}  // namespace ternion
