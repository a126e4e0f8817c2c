#include "training/pipeline_trace.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "framework/error.h"
#include "framework/strict_json.h"

namespace ternion {

namespace {

constexpr int kFieldsPerSpan = 5;  // start, end, kind, micro-batch, chunk

const char* category_of(PipelineAction::Kind kind) {
  switch (kind) {
    case PipelineAction::Kind::Forward: return "forward";
    case PipelineAction::Kind::Backward: return "backward";
    case PipelineAction::Kind::BackwardInput: return "input gradient";
    case PipelineAction::Kind::BackwardWeight: return "weight gradient";
    case PipelineAction::Kind::SendActivation:
    case PipelineAction::Kind::SendGradient: return "send";
    case PipelineAction::Kind::RecvActivation:
    case PipelineAction::Kind::RecvGradient: return "recv";
  }
  return "?";
}

std::string span_name(PipelineAction::Kind kind, int micro_batch, int chunk) {
  const char* prefix = "?";
  switch (kind) {
    case PipelineAction::Kind::Forward: prefix = "F"; break;
    case PipelineAction::Kind::Backward: prefix = "B"; break;  // B and W at once
    case PipelineAction::Kind::BackwardInput: prefix = "B"; break;
    case PipelineAction::Kind::BackwardWeight: prefix = "W"; break;
    case PipelineAction::Kind::SendActivation: prefix = "send act "; break;
    case PipelineAction::Kind::SendGradient: prefix = "send grad "; break;
    case PipelineAction::Kind::RecvActivation: prefix = "recv act "; break;
    case PipelineAction::Kind::RecvGradient: prefix = "recv grad "; break;
  }
  return std::string(prefix) + std::to_string(micro_batch) +
         (chunk > 0 ? "." + std::to_string(chunk) : "");
}

// A complete event ("X") of Chrome's trace format, times in microseconds.
OrderedJson event(const std::string& name, const char* category, int rank, double start_us,
           double duration_us) {
  return {{"name", name}, {"cat", category}, {"ph", "X"}, {"pid", 0},
          {"tid", rank},  {"ts", start_us},  {"dur", duration_us}};
}

}  // namespace

TracedStep write_pipeline_trace(const std::string& path, const PipelineStepResult& mine,
                                const ProcessGroups& groups, std::int64_t step,
                                int micro_batches) {
  Communicator& world = groups.world();
  // The spans travel as floats: times relative to this rank's step start keep microseconds
  // for steps of seconds; the step start itself (seconds since the node booted) travels as
  // two floats, a high and a low part.
  const auto n = static_cast<std::int64_t>(mine.spans.size());
  Tensor count = Tensor::from_vector({static_cast<float>(n)}, {1});
  Tensor counts = Tensor::empty({world.size()});
  world.all_gather(counts, count);
  std::int64_t most = 0;
  for (int r = 0; r < world.size(); ++r)
    most = std::max<std::int64_t>(most, counts.data<float>()[r]);

  std::vector<float> packed(static_cast<std::size_t>(2 + most * kFieldsPerSpan), 0.0f);
  const float start_high = static_cast<float>(mine.step_start);
  packed[0] = start_high;
  packed[1] = static_cast<float>(mine.step_start - start_high);
  for (std::int64_t i = 0; i < n; ++i) {
    const PipelineSpan& s = mine.spans[static_cast<std::size_t>(i)];
    float* f = &packed[static_cast<std::size_t>(2 + i * kFieldsPerSpan)];
    f[0] = static_cast<float>(s.start);
    f[1] = static_cast<float>(s.end);
    f[2] = static_cast<float>(static_cast<int>(s.action.kind));
    f[3] = static_cast<float>(s.action.micro_batch);
    f[4] = static_cast<float>(s.action.chunk);
  }
  const Tensor local = Tensor::from_vector(packed, {static_cast<std::int64_t>(packed.size())});
  Tensor all = Tensor::empty({world.size(), local.numel()});
  world.all_gather(all, local);
  if (world.rank() != 0) return {};

  // Steady clocks are comparable within a node only: each node's timeline starts at the
  // earliest step start of its ranks.
  double finish = -1e300, busy = 0.0;
  std::vector<double> starts(static_cast<std::size_t>(world.size()));
  std::map<int, double> node_origin;
  const std::vector<int>& node_of = groups.node_of_rank();
  for (int r = 0; r < world.size(); ++r) {
    const float* f = all.data<float>() + r * local.numel();
    starts[static_cast<std::size_t>(r)] = static_cast<double>(f[0]) + f[1];
    const int node = node_of[static_cast<std::size_t>(r)];
    const auto it = node_origin.find(node);
    node_origin[node] = it == node_origin.end()
                            ? starts[static_cast<std::size_t>(r)]
                            : std::min(it->second, starts[static_cast<std::size_t>(r)]);
  }
  // Each stage's compute times, summed over its ranks: forward, backward (all kinds), W.
  const int stages = groups.layout().pp_size;
  std::vector<double> forward(static_cast<std::size_t>(stages)),
      backward(static_cast<std::size_t>(stages)), weight(static_cast<std::size_t>(stages));
  std::vector<int> ranks_of_stage(static_cast<std::size_t>(stages));
  OrderedJson events = OrderedJson::array();
  for (int r = 0; r < world.size(); ++r) {
    const float* f = all.data<float>() + r * local.numel();
    const double base = starts[static_cast<std::size_t>(r)] -
                        node_origin.at(node_of[static_cast<std::size_t>(r)]);
    const RankCoords& coords = groups.layout().at(r).coords;
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", r},
                      {"args", {{"name", detail::concat("rank ", r, " (pp ", coords.pp_rank,
                                                        ", tp ", coords.tp_rank, ")")}}}});
    const auto pp = static_cast<std::size_t>(groups.layout().at(r).coords.pp_rank);
    ++ranks_of_stage[pp];
    double previous_end = 0.0;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(counts.data<float>()[r]); ++i) {
      const float* s = f + 2 + i * kFieldsPerSpan;
      const auto kind = static_cast<PipelineAction::Kind>(static_cast<int>(s[2]));
      const double start = base + s[0], end = base + s[1];
      if (start - previous_end > 1e-6 && i > 0)
        events.push_back(
            event("idle", "idle", r, previous_end * 1e6, (start - previous_end) * 1e6));
      events.push_back(event(span_name(kind, static_cast<int>(s[3]), static_cast<int>(s[4])),
                             category_of(kind), r, start * 1e6, (end - start) * 1e6));
      if (is_compute(kind)) busy += end - start;
      if (kind == PipelineAction::Kind::Forward) forward[pp] += end - start;
      if (is_compute(kind) && kind != PipelineAction::Kind::Forward) backward[pp] += end - start;
      if (kind == PipelineAction::Kind::BackwardWeight) weight[pp] += end - start;
      previous_end = end;
      finish = std::max(finish, end);
    }
  }
  const OrderedJson trace = {{"displayTimeUnit", "ms"},
                      {"otherData", {{"step", step}}},
                      {"traceEvents", std::move(events)}};

  const std::string partial = path + ".partial";
  {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::ofstream file(partial, std::ios::binary);
    TN_CHECK_AS(DataError, file.good(), "logging.trace_file: cannot write '", partial, "': ",
                std::strerror(errno));
    file << json_text(trace) << "\n";
    TN_CHECK_AS(DataError, file.good(), "logging.trace_file: cannot write '", partial, "'");
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  TN_CHECK_AS(DataError, !ec, "cannot rename '", partial, "' to '", path, "': ", ec.message());
  TracedStep traced;
  traced.bubble = finish > 0.0 ? 1.0 - busy / (world.size() * finish) : 0.0;
  for (std::size_t s = 0; s < forward.size(); ++s) {
    const double per_micro_batch = 1.0 / (std::max(1, ranks_of_stage[s]) * micro_batches);
    StageCost cost{forward[s] * per_micro_batch, backward[s] * per_micro_batch, 0.5};
    if (weight[s] > 0) cost.weight_share = weight[s] / backward[s];
    traced.stage_costs.push_back(cost);
  }
  return traced;
}

}  // namespace ternion
