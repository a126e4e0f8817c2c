#include "parallel/bucket_reduction.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "framework/error.h"
#include "kernels/convert.h"
#include "kernels/elementwise.h"
#include "parallel/rank_layout.h"

namespace ternion {

GradReduceMode parse_grad_reduce_mode(const std::string& text) {
  if (text == "flat") return GradReduceMode::Flat;
  if (text == "hierarchical") return GradReduceMode::Hierarchical;
  if (text == "auto") return GradReduceMode::Auto;
  TN_THROW(ConfigError, "parallel.grad_reduce must be flat, hierarchical or auto, got '", text,
           "'");
}

WireType parse_wire_type(const std::string& text) {
  if (text == "fp32") return WireType::F32;
  if (text == "bf16") return WireType::BF16;
  TN_THROW(ConfigError, "parallel.grad_reduce_dtype must be fp32 or bf16, got '", text, "'");
}

GradReducePlan plan_grad_reduce(GradReduceMode mode, const std::vector<int>& members,
                                const std::vector<int>& node_of_rank, int position) {
  TN_CHECK(position >= 0 && position < static_cast<int>(members.size()), "data rank ", position,
           " of ", members.size());
  GradReducePlan plan;
  if (mode == GradReduceMode::Flat) return plan;
  // The group's members on each node, nodes in the order of their first member.
  std::vector<int> node_ids;
  std::map<int, std::vector<int>> on_node;
  for (int member : members) {
    const int node = node_of_rank.at(static_cast<std::size_t>(member));
    if (!on_node.count(node)) node_ids.push_back(node);
    on_node[node].push_back(member);
  }
  const std::size_t per_node = on_node[node_ids.front()].size();
  const bool even = std::all_of(on_node.begin(), on_node.end(),
                                [&](const auto& n) { return n.second.size() == per_node; });
  std::ostringstream why;
  if (node_ids.size() < 2) {
    why << "its " << members.size() << " ranks are on one node";
  } else if (!even) {
    why << "its ranks are spread unevenly over " << node_ids.size() << " nodes (";
    for (std::size_t i = 0; i < node_ids.size(); ++i)
      why << (i ? ", " : "") << on_node[node_ids[i]].size();
    why << ')';
  } else if (per_node < 2) {
    why << "it has one rank per node, so there is nothing to reduce inside a node";
  }
  if (!why.str().empty()) {
    if (mode == GradReduceMode::Hierarchical)
      plan.why = "parallel.grad_reduce: hierarchical needs a data group with the same number "
                 "(two or more) of its ranks on each of several nodes, but " + why.str() +
                 "; reducing flat";
    return plan;
  }
  plan.hierarchical = true;
  plan.nodes = static_cast<int>(node_ids.size());
  plan.ranks_per_node = static_cast<int>(per_node);
  const int me = members[static_cast<std::size_t>(position)];
  plan.node_group = on_node[node_of_rank.at(static_cast<std::size_t>(me))];
  const auto place = std::find(plan.node_group.begin(), plan.node_group.end(), me) -
                     plan.node_group.begin();
  for (int node : node_ids)
    plan.across_group.push_back(on_node[node][static_cast<std::size_t>(place)]);
  const auto data_rank = [&](int member) {
    return std::find(members.begin(), members.end(), member) - members.begin();
  };
  std::sort(plan.across_group.begin(), plan.across_group.end(),
            [&](int a, int b) { return data_rank(a) < data_rank(b); });
  return plan;
}

StagedReduction::StagedReduction(Communicator& data, const GradReducePlan& plan, WireType wire)
    : wire_(wire), size_(data.size()) {
  // A level's gathers get a communicator of their own where they would otherwise queue behind
  // the next bucket's reduction on the same one (parallel/collective_chain.h keeps the order).
  const auto own = [&](std::unique_ptr<Communicator> comm) {
    TN_CHECK(comm != nullptr, "a split of ", data.name(), " left rank ", data.rank(), " out");
    owned_.push_back(std::move(comm));
    return owned_.back().get();
  };
  const auto gather_of = [&](Communicator& comm) {
    return own(comm.split(0, comm.rank(), comm.name() + "-gather"));
  };
  std::ostringstream text;
  if (!plan.hierarchical) {
    levels_.push_back({&data, wire == WireType::BF16 ? gather_of(data) : &data});
    shard_index_ = data.rank();
    text << "flat over " << data.name();
  } else {
    Communicator* node = own(data.split(plan.node_group.front(), data.rank(),
                                        "dp-node" + rank_list_str(plan.node_group)));
    Communicator* across = own(data.split(plan.across_group.front(), data.rank(),
                                          "dp-across" + rank_list_str(plan.across_group)));
    TN_CHECK(node->size() == plan.ranks_per_node && across->size() == plan.nodes &&
                 node->size() * across->size() == size_,
             "hierarchical reduction: ", node->size(), " ranks per node x ", across->size(),
             " nodes for a data group of ", size_);
    levels_.push_back({node, gather_of(*node)});
    levels_.push_back({across, wire == WireType::BF16 ? gather_of(*across) : across});
    shard_index_ = node->rank() * across->size() + across->rank();
    text << "hierarchical: inside each node over " << node->name() << ", then across "
         << plan.nodes << " nodes over " << across->name();
  }
  text << ", " << (wire == WireType::BF16 ? "bf16" : "f32") << " on the wire";
  description_ = text.str();
}

std::string StagedReduction::describe() const { return description_; }

void StagedReduction::scatter_stages(const Level& level, const Tensor& in, const Tensor& out,
                                     std::vector<ChainStage>& stages) const {
  Communicator* comm = level.scatter;
  if (wire_ == WireType::F32) {
    stages.push_back({comm, [comm, in = in, out = out]() mutable {
                        return comm->reduce_scatter_async(out, in, ReduceOp::Sum);
                      }, {}});
    return;
  }
  // An all-to-all of bf16 chunks, summed by each chunk's owner in f32.
  const int parts = comm->size(), me = comm->rank();
  const std::int64_t chunk = out.numel();
  TN_CHECK(in.numel() == chunk * parts, "reduce-scatter of ", in.numel(), " into ", parts,
           " chunks of ", chunk);
  Tensor sent = Tensor::empty({in.numel()}, DType::BF16, in.device());
  Tensor received = Tensor::empty({in.numel()}, DType::BF16, in.device());
  stages.push_back(
      {comm,
       [=]() {
         Tensor s = sent;
         convert(s, in);
         std::vector<P2POp> ops;
         for (int peer = 0; peer < parts; ++peer) {
           if (peer == me) continue;
           ops.push_back({P2POp::Kind::Send, sent.slice(0, peer * chunk, chunk), peer, 0});
           ops.push_back({P2POp::Kind::Recv, received.slice(0, peer * chunk, chunk), peer, 0});
         }
         return comm->exchange_async(std::move(ops));
       },
       [=]() {
         Tensor sum = out, term = Tensor::empty({chunk}, DType::F32, out.device());
         sum.copy_from(in.slice(0, me * chunk, chunk));
         for (int peer = 0; peer < parts; ++peer) {
           if (peer == me) continue;
           convert(term, received.slice(0, peer * chunk, chunk));
           accumulate(sum, term);
         }
       }});
}

void StagedReduction::gather_stages(const Level& level, const Tensor& in, const Tensor& out,
                                    bool rounded, std::vector<ChainStage>& stages) const {
  Communicator* comm = level.gather;
  if (!rounded) {
    stages.push_back(
        {comm,
         [comm, in = in, out = out]() mutable { return comm->all_gather_async(out, in); },
         {}});
    return;
  }
  Tensor whole = Tensor::empty({out.numel()}, DType::BF16, out.device());
  Tensor mine = whole.slice(0, comm->rank() * in.numel(), in.numel());
  stages.push_back({comm,
                    [comm, in = in, whole, mine]() mutable {
                      convert(mine, in);
                      return comm->all_gather_async(whole, mine);
                    },
                    [whole, out = out]() mutable { convert(out, whole); }});
}

WorkHandle StagedReduction::all_reduce(std::size_t /*bucket*/, Tensor& whole) {
  std::vector<ChainStage> stages;
  std::vector<Tensor> parts{whole.view({-1})};  // parts[i + 1]: this rank's share after level i
  for (std::size_t i = 0; i + 1 < levels_.size(); ++i) {
    const Tensor& in = parts.back();
    Tensor share =
        Tensor::empty({in.numel() / levels_[i].scatter->size()}, DType::F32, in.device());
    scatter_stages(levels_[i], in, share, stages);
    parts.push_back(share);
  }
  const Level& last = levels_.back();
  if (wire_ == WireType::F32) {
    stages.push_back({last.scatter, [comm = last.scatter, t = parts.back()]() mutable {
                        return comm->all_reduce_async(t, ReduceOp::Sum);
                      }, {}});
  } else {
    Tensor share = Tensor::empty({parts.back().numel() / last.scatter->size()}, DType::F32,
                                 whole.device());
    scatter_stages(last, parts.back(), share, stages);
    gather_stages(last, share, parts.back(), /*rounded=*/true, stages);
  }
  for (std::size_t i = levels_.size() - 1; i-- > 0;)
    gather_stages(levels_[i], parts[i + 1], parts[i], wire_ == WireType::BF16, stages);
  return chains_.submit(std::move(stages));
}

WorkHandle StagedReduction::reduce_scatter(std::size_t /*bucket*/, Tensor& shard,
                                           const Tensor& whole) {
  std::vector<ChainStage> stages;
  Tensor in = whole.view({-1});
  for (std::size_t i = 0; i < levels_.size(); ++i) {
    Tensor out = i + 1 == levels_.size()
                     ? shard.view({-1})
                     : Tensor::empty({in.numel() / levels_[i].scatter->size()}, DType::F32,
                                     in.device());
    scatter_stages(levels_[i], in, out, stages);
    in = out;
  }
  return chains_.submit(std::move(stages));
}

WorkHandle StagedReduction::all_gather(Tensor& whole, const Tensor& shard) {
  // blocks[i + 1]: this rank's block of blocks[i] at level i; the last is `shard`.
  std::vector<Tensor> blocks{whole.view({-1})};
  for (const Level& level : levels_) {
    const std::int64_t n = blocks.back().numel() / level.scatter->size();
    blocks.push_back(blocks.back().slice(0, level.scatter->rank() * n, n));
  }
  TN_CHECK(blocks.back().numel() == shard.numel() && blocks.back().same_start_as(shard),
           "all_gather: the shard is not this rank's chunk ", shard_index_, " of the whole");
  std::vector<ChainStage> stages;
  for (std::size_t i = levels_.size(); i-- > 0;)
    gather_stages(levels_[i], blocks[i + 1], blocks[i], /*rounded=*/false, stages);
  return chains_.submit(std::move(stages));
}

}  // namespace ternion
