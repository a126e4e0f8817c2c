#include "parallel/pipeline_simulator.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "framework/error.h"

namespace ternion {

namespace {

using Kind = PipelineAction::Kind;

constexpr int kKinds = static_cast<int>(Kind::BackwardWeight) + 1;

struct StageState {
  std::size_t next = 0;  // index of the next action to run
  double clock = 0;
  double busy = 0;
  int held = 0;  // (micro-batch, chunk) pairs forwarded, their parameter gradients not done
  int peak = 0;
  std::vector<char> done;  // per (kind, micro-batch, chunk): action_index()
};

double cost_of(const StageCost& c, Kind kind) {
  switch (kind) {
    case Kind::Forward: return c.forward;
    case Kind::Backward: return c.backward;
    case Kind::BackwardInput: return c.backward * (1.0 - c.weight_share);
    case Kind::BackwardWeight: return c.backward * c.weight_share;
    default: return 0.0;
  }
}

class Simulator {
 public:
  Simulator(const std::vector<std::vector<PipelineAction>>& lists, int virtual_stages,
            const std::vector<StageCost>& costs, double transfer_time)
      : lists_(lists),
        stages_(static_cast<int>(lists.size())),
        virtual_stages_(virtual_stages),
        costs_(costs),
        transfer_time_(transfer_time),
        state_(lists.size()) {
    // Flat tables rather than sets: the planner simulates hundreds of schedules per plan.
    for (const auto& actions : lists)
      for (const PipelineAction& a : actions)
        micro_batches_ = std::max(micro_batches_, a.micro_batch + 1);
    for (StageState& st : state_)
      st.done.assign(static_cast<std::size_t>(kKinds) * micro_batches_ * virtual_stages_, 0);
    sent_at_.assign(2 * static_cast<std::size_t>(micro_batches_) * stages_ * virtual_stages_, -1.0);
  }

  PipelineSimulation run() {
    PipelineSimulation result;
    result.spans.resize(lists_.size());
    // Each sweep runs every rank as far as it can; a sweep that runs nothing ends the step.
    for (bool progress = true; progress;) {
      progress = false;
      for (int s = 0; s < stages_; ++s)
        while (state_[index(s)].next < list(s).size() && run_next(s, result)) progress = true;
    }
    summarise(result);
    return result;
  }

 private:
  static std::size_t index(int s) { return static_cast<std::size_t>(s); }
  const std::vector<PipelineAction>& list(int s) const { return lists_[index(s)]; }
  int last_virtual_stage() const { return stages_ * virtual_stages_ - 1; }

  std::size_t action_index(Kind kind, const PipelineAction& a) const {
    return (static_cast<std::size_t>(kind) * micro_batches_ + a.micro_batch) * virtual_stages_ +
           a.chunk;
  }
  bool has_done(int s, Kind kind, const PipelineAction& a) const {
    return state_[index(s)].done[action_index(kind, a)] != 0;
  }

  // Checks that action `a` on rank `s` has what it consumes.
  void check_inputs(int s, const PipelineAction& a) const {
    const int u = pipeline_virtual_stage(stages_, s, a.chunk);
    // Formats its message only on failure: this runs for every action of every plan.
    const auto require = [&](bool ok, const char* why) { TN_CHECK(ok, "stage ", s, ": ", a, why); };
    require(!has_done(s, a.kind, a), " runs twice");
    switch (a.kind) {
      case Kind::Forward:
        require(u == 0 || has_done(s, Kind::RecvActivation, a),
                " before its activation was received");
        break;
      case Kind::Backward:
      case Kind::BackwardInput:
        require(has_done(s, Kind::Forward, a), " before its forward");
        require(u == last_virtual_stage() || has_done(s, Kind::RecvGradient, a),
                " before its gradient was received");
        require(!has_done(s, a.kind == Kind::Backward ? Kind::BackwardInput : Kind::Backward, a),
                " after another backward of the same micro-batch");
        break;
      case Kind::BackwardWeight:
        require(has_done(s, Kind::BackwardInput, a), " before its BackwardInput");
        break;
      case Kind::SendActivation:
        require(has_done(s, Kind::Forward, a), " before its forward");
        break;
      case Kind::SendGradient:
        require(has_done(s, Kind::Backward, a) || has_done(s, Kind::BackwardInput, a),
                " before its backward");
        break;
      case Kind::RecvActivation:
      case Kind::RecvGradient:
        break;
    }
  }

  // The message a send issues or a receive waits for: its slot in sent_at_, by (is a
  // gradient, micro-batch, virtual stage of the sender).
  std::size_t message_of(int s, const PipelineAction& a) const {
    const bool gradient = a.kind == Kind::SendGradient || a.kind == Kind::RecvGradient;
    const PipelinePeer from = pipeline_peer(a, stages_, virtual_stages_, s);  // checks the peer
    const int sender = is_send(a.kind) ? pipeline_virtual_stage(stages_, s, a.chunk)
                                       : pipeline_virtual_stage(stages_, from.stage, from.chunk);
    return (static_cast<std::size_t>(gradient) * micro_batches_ + a.micro_batch) * stages_ *
               virtual_stages_ + sender;
  }

  // Runs rank s's next action; false when it is a receive whose send has not been issued.
  bool run_next(int s, PipelineSimulation& result) {
    StageState& st = state_[index(s)];
    const PipelineAction& a = list(s)[st.next];
    TN_CHECK(a.micro_batch >= 0 && a.chunk >= 0 && a.chunk < virtual_stages_, "stage ", s,
             ": ", pipeline_action_str(a), " with ", virtual_stages_, " chunks per rank");
    check_inputs(s, a);
    PipelineSpan span{st.clock, st.clock, a};
    if (is_recv(a.kind)) {
      const double sent = sent_at_[message_of(s, a)];
      if (sent < 0) return false;
      st.clock = std::max(st.clock, sent + transfer_time_);
    } else if (is_send(a.kind)) {
      double& sent = sent_at_[message_of(s, a)];
      if (sent < 0) sent = st.clock;
    } else {
      const double cost = cost_of(costs_[index(s)], a.kind) / virtual_stages_;
      st.clock += cost;
      st.busy += cost;
      // A micro-batch's activations are held from its forward until its parameter gradients.
      if (a.kind == Kind::Forward) ++st.held;
      if (a.kind == Kind::Backward || a.kind == Kind::BackwardWeight) --st.held;
      st.peak = std::max(st.peak, st.held);
    }
    span.end = st.clock;
    result.spans[index(s)].push_back(span);
    st.done[action_index(a.kind, a)] = 1;
    ++st.next;
    return true;
  }

  std::string blocked_clause(int s) const {
    const StageState& st = state_[index(s)];
    const PipelineAction& a = list(s)[st.next];
    const PipelinePeer from = pipeline_peer(a, stages_, virtual_stages_, s);
    const StageState& peer = state_[index(from.stage)];
    std::ostringstream out;
    out << "stage " << s << " blocks at action " << st.next << " of " << list(s).size() << ", "
        << a << " from stage " << from.stage << " chunk " << from.chunk << ", which ";
    if (peer.next >= list(from.stage).size())
      out << "has finished its list without sending it";
    else
      out << "blocks at action " << peer.next << " of " << list(from.stage).size();
    return out.str();
  }

  void summarise(PipelineSimulation& result) const {
    std::ostringstream deadlock;
    for (int s = 0; s < stages_; ++s) {
      const StageState& st = state_[index(s)];
      const bool finished = st.next >= list(s).size();
      result.blocked_at.push_back(finished ? -1 : static_cast<int>(st.next));
      if (!finished) {
        deadlock << (result.deadlocked ? "; " : "") << blocked_clause(s);
        result.deadlocked = true;
      }
      result.makespan = std::max(result.makespan, st.clock);
      result.busy_time.push_back(st.busy);
      result.peak_activations.push_back(st.peak);
    }
    result.deadlock = deadlock.str();
    double idle = 0;
    for (double busy : result.busy_time) {
      result.idle_time.push_back(result.makespan - busy);
      idle += result.makespan - busy;
    }
    result.bubble_fraction = result.makespan > 0 ? idle / (stages_ * result.makespan) : 0;
  }

  const std::vector<std::vector<PipelineAction>>& lists_;
  int stages_;
  int virtual_stages_;
  std::vector<StageCost> costs_;  // per stage, for all of its chunks
  double transfer_time_;
  std::vector<StageState> state_;
  int micro_batches_ = 0;
  std::vector<double> sent_at_;  // when each message's send was issued; negative: not yet
};

}  // namespace

PipelineSimulation simulate_pipeline_actions(
    const std::vector<std::vector<PipelineAction>>& stage_actions, int virtual_stages,
    const std::vector<StageCost>& costs, double transfer_time) {
  TN_CHECK(!stage_actions.empty(), "a pipeline needs at least one stage");
  TN_CHECK(virtual_stages >= 1, "virtual_stages ", virtual_stages);
  TN_CHECK(costs.size() == stage_actions.size(), costs.size(), " stage costs for ",
           stage_actions.size(), " stages");
  for (const StageCost& c : costs)
    TN_CHECK(std::isfinite(c.forward) && c.forward >= 0 && std::isfinite(c.backward) &&
                 c.backward >= 0 && c.weight_share >= 0 && c.weight_share <= 1,
             "costs must be finite and non-negative, got forward ", c.forward, " backward ",
             c.backward, " (weight share ", c.weight_share, ")");
  TN_CHECK(std::isfinite(transfer_time) && transfer_time >= 0, "transfer time ", transfer_time);
  return Simulator(stage_actions, virtual_stages, costs, transfer_time).run();
}

PipelineSimulation simulate_pipeline_actions(
    const std::vector<std::vector<PipelineAction>>& stage_actions, int virtual_stages,
    double forward_cost, double backward_cost, double weight_share) {
  return simulate_pipeline_actions(
      stage_actions, virtual_stages,
      std::vector<StageCost>(stage_actions.size(),
                             StageCost{forward_cost, backward_cost, weight_share}),
      0.0);
}

std::vector<std::vector<PipelineAction>> pipeline_schedules(PipelineSchedule kind, int stages,
                                                            int micro_batches, int virtual_stages) {
  validate_pipeline_schedule(kind, stages, micro_batches, virtual_stages);
  std::vector<std::vector<PipelineAction>> lists;
  for (int s = 0; s < stages; ++s)
    lists.push_back(pipeline_schedule(kind, stages, micro_batches, virtual_stages, s));
  return lists;
}

PipelineSimulation simulate_pipeline(PipelineSchedule kind, int stages, int micro_batches,
                                     int virtual_stages, double forward_cost,
                                     double backward_cost, double weight_share) {
  return simulate_pipeline_actions(pipeline_schedules(kind, stages, micro_batches, virtual_stages),
                                   virtual_stages, forward_cost, backward_cost, weight_share);
}

}  // namespace ternion
