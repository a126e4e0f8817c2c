#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "framework/error.h"

namespace ternion {

namespace {

using Kind = PipelineAction::Kind;

// One compute step of the order, before its communication is attached.
struct ComputeStep {
  Kind kind;  // Forward, Backward, BackwardInput or BackwardWeight
  int micro_batch;
  int chunk;
};

constexpr const char* kMicroBatchCount =
    "training.global_batch_size / (parallel.micro_batch_size x parallel.data)";

std::vector<ComputeStep> gpipe_order(int micro_batches) {
  std::vector<ComputeStep> order;
  for (int m = 0; m < micro_batches; ++m) order.push_back({Kind::Forward, m, 0});
  for (int m = 0; m < micro_batches; ++m) order.push_back({Kind::Backward, m, 0});
  return order;
}

std::vector<ComputeStep> one_f_one_b_order(int stages, int micro_batches, int stage) {
  const int warmup = std::min(stages - stage - 1, micro_batches);
  const int steady = micro_batches - warmup;
  std::vector<ComputeStep> order;
  for (int i = 0; i < warmup; ++i) order.push_back({Kind::Forward, i, 0});
  for (int i = 0; i < steady; ++i) {
    order.push_back({Kind::Forward, warmup + i, 0});
    order.push_back({Kind::Backward, i, 0});
  }
  for (int i = steady; i < micro_batches; ++i) order.push_back({Kind::Backward, i, 0});
  return order;
}

// ZB-H1: 1F1B's warm-up, then (F, B) steps whose W wait until rank s has s of them, then
// (F, B, W) and (B, W) steps, then the waiting W. W runs in micro-batch order.
std::vector<ComputeStep> zero_bubble_h1_order(int stages, int micro_batches, int stage) {
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<ComputeStep> order;
  int forward = 0, backward = 0, weight = 0;
  for (; forward < warmup; ++forward) order.push_back({Kind::Forward, forward, 0});
  while (backward < micro_batches) {
    if (forward < micro_batches) order.push_back({Kind::Forward, forward++, 0});
    order.push_back({Kind::BackwardInput, backward++, 0});
    if (backward > stage) order.push_back({Kind::BackwardWeight, weight++, 0});
  }
  while (weight < micro_batches) order.push_back({Kind::BackwardWeight, weight++, 0});
  return order;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving: the k-th forward and the k-th
// backward of the M * v steps, their chunk and micro-batch from Megatron's
// get_model_chunk_id and get_microbatch_id_in_model_chunk.
std::vector<ComputeStep> interleaved_order(int stages, int micro_batches, int virtual_stages,
                                           int stage) {
  const int total = micro_batches * virtual_stages;
  const int group = stages * virtual_stages;  // steps in one group of p micro-batches
  auto step = [&](Kind kind, int k) {
    const int chunk_in_order = (k % group) / stages;
    const int chunk =
        kind == Kind::Forward ? chunk_in_order : virtual_stages - 1 - chunk_in_order;
    return ComputeStep{kind, (k / group) * stages + k % stages, chunk};
  };
  // With as many micro-batches as stages Megatron runs all forwards, then all backwards.
  const int warmup =
      micro_batches == stages
          ? total
          : std::min((stages - stage - 1) * 2 + (virtual_stages - 1) * stages, total);
  const int steady = total - warmup;
  std::vector<ComputeStep> order;
  for (int k = 0; k < warmup; ++k) order.push_back(step(Kind::Forward, k));
  for (int k = 0; k < steady; ++k) {
    order.push_back(step(Kind::Forward, warmup + k));
    order.push_back(step(Kind::Backward, k));
  }
  for (int k = steady; k < total; ++k) order.push_back(step(Kind::Backward, k));
  return order;
}

// The order with each compute's receive in front of it and its send behind it.
std::vector<PipelineAction> with_communication(const std::vector<ComputeStep>& order, int stages,
                                               int virtual_stages, int stage) {
  const int last_virtual_stage = stages * virtual_stages - 1;
  std::vector<PipelineAction> actions;
  actions.reserve(order.size() * 3);
  for (const ComputeStep& c : order) {
    const int u = pipeline_virtual_stage(stages, stage, c.chunk);
    if (c.kind == Kind::Forward) {
      if (u > 0) actions.push_back({Kind::RecvActivation, c.micro_batch, c.chunk});
      actions.push_back({Kind::Forward, c.micro_batch, c.chunk});
      if (u < last_virtual_stage) actions.push_back({Kind::SendActivation, c.micro_batch, c.chunk});
    } else if (is_backward(c.kind)) {
      if (u < last_virtual_stage) actions.push_back({Kind::RecvGradient, c.micro_batch, c.chunk});
      actions.push_back({c.kind, c.micro_batch, c.chunk});
      if (u > 0) actions.push_back({Kind::SendGradient, c.micro_batch, c.chunk});
    } else {
      actions.push_back({c.kind, c.micro_batch, c.chunk});  // W: nothing to send or receive
    }
  }
  return actions;
}

}  // namespace

void validate_pipeline_schedule(PipelineSchedule kind, int stages, int micro_batches,
                                int virtual_stages) {
  TN_CHECK_AS(ConfigError, stages >= 1, "parallel.pipeline must be at least 1, got ", stages);
  TN_CHECK_AS(ConfigError, micro_batches >= 1, "the micro-batch count (", kMicroBatchCount,
              ") must be at least 1, got ", micro_batches);
  TN_CHECK_AS(ConfigError, virtual_stages >= 1, "parallel.virtual_stages must be at least 1, got ",
              virtual_stages);
  if (kind == PipelineSchedule::ZeroBubbleH1)
    TN_CHECK_AS(ConfigError, micro_batches >= stages, "the zb-h1 schedule needs at least as many "
                "micro-batches as pipeline stages (", stages, ") to defer its weight gradients "
                "into, got ", micro_batches, "; the count is ", kMicroBatchCount);
  if (kind != PipelineSchedule::Interleaved) {
    TN_CHECK_AS(ConfigError, virtual_stages == 1, "parallel.virtual_stages (", virtual_stages,
                ") needs the interleaved pipeline schedule; the ", pipeline_schedule_name(kind),
                " schedule runs one model chunk per rank");
    return;
  }
  TN_CHECK_AS(ConfigError, stages > 1 || virtual_stages == 1, "parallel.virtual_stages (",
              virtual_stages,
              ") needs parallel.pipeline > 1: interleaving alternates model chunks between "
              "pipeline stages, and one stage has none to alternate with");
  TN_CHECK_AS(ConfigError, micro_batches % stages == 0,
              "interleaving needs the micro-batch count (", micro_batches,
              ") to be a multiple of parallel.pipeline (", stages, "); the count is ",
              kMicroBatchCount);
}

std::vector<PipelineAction> pipeline_schedule(PipelineSchedule kind, int stages, int micro_batches,
                                              int virtual_stages, int stage) {
  validate_pipeline_schedule(kind, stages, micro_batches, virtual_stages);
  TN_CHECK(stage >= 0 && stage < stages, "stage ", stage, " outside a pipeline of ", stages);
  switch (kind) {
    case PipelineSchedule::GPipe:
      return with_communication(gpipe_order(micro_batches), stages, 1, stage);
    case PipelineSchedule::OneFOneB:
      return with_communication(one_f_one_b_order(stages, micro_batches, stage), stages, 1, stage);
    case PipelineSchedule::Interleaved:
      return with_communication(interleaved_order(stages, micro_batches, virtual_stages, stage),
                                stages, virtual_stages, stage);
    case PipelineSchedule::ZeroBubbleH1:
      return with_communication(zero_bubble_h1_order(stages, micro_batches, stage), stages, 1,
                                stage);
  }
  TN_CHECK(false, "unknown pipeline schedule ", static_cast<int>(kind));
  return {};
}

int pipeline_virtual_stage(int stages, int stage, int chunk) { return chunk * stages + stage; }

PipelinePeer pipeline_peer(const PipelineAction& action, int stages, int virtual_stages,
                           int stage) {
  TN_CHECK(!is_compute(action.kind), pipeline_action_str(action), " has no peer");
  TN_CHECK(stage >= 0 && stage < stages && action.chunk >= 0 && action.chunk < virtual_stages,
           pipeline_action_str(action), " on stage ", stage, " outside ", stages, " stages x ",
           virtual_stages, " chunks");
  const bool downstream = action.kind == Kind::SendActivation || action.kind == Kind::RecvGradient;
  const int u = pipeline_virtual_stage(stages, stage, action.chunk);
  const int peer = downstream ? u + 1 : u - 1;
  TN_CHECK(peer >= 0 && peer < stages * virtual_stages, pipeline_action_str(action),
           " on virtual stage ", u, " has no peer: the pipeline has ", stages * virtual_stages,
           " virtual stages");
  return {peer % stages, peer / stages};
}

bool is_compute(PipelineAction::Kind kind) {
  return kind == Kind::Forward || is_backward(kind) || kind == Kind::BackwardWeight;
}
bool is_backward(PipelineAction::Kind kind) {
  return kind == Kind::Backward || kind == Kind::BackwardInput;
}
bool is_send(PipelineAction::Kind kind) {
  return kind == Kind::SendActivation || kind == Kind::SendGradient;
}
bool is_recv(PipelineAction::Kind kind) {
  return kind == Kind::RecvActivation || kind == Kind::RecvGradient;
}

const char* pipeline_schedule_name(PipelineSchedule kind) {
  switch (kind) {
    case PipelineSchedule::GPipe: return "gpipe";
    case PipelineSchedule::OneFOneB: return "1f1b";
    case PipelineSchedule::Interleaved: return "interleaved";
    case PipelineSchedule::ZeroBubbleH1: return "zb-h1";
  }
  return "unknown";
}

const char* pipeline_action_kind_name(PipelineAction::Kind kind) {
  switch (kind) {
    case Kind::Forward: return "Forward";
    case Kind::Backward: return "Backward";
    case Kind::RecvActivation: return "RecvActivation";
    case Kind::SendActivation: return "SendActivation";
    case Kind::RecvGradient: return "RecvGradient";
    case Kind::SendGradient: return "SendGradient";
    case Kind::BackwardInput: return "BackwardInput";
    case Kind::BackwardWeight: return "BackwardWeight";
  }
  return "Unknown";
}

std::string pipeline_action_str(const PipelineAction& action) {
  std::ostringstream out;
  out << action;
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const PipelineAction& action) {
  return out << pipeline_action_kind_name(action.kind) << "(m=" << action.micro_batch
             << ", chunk=" << action.chunk << ")";
}

}  // namespace ternion
