// Runs every pipeline rank's action list (parallel/pipeline_schedule.h) together on a clock,
// under the executor's semantics, to find deadlocks and to measure the bubble and the
// activation memory of a schedule before a job runs it.
//
// The clock: each rank starts at time 0 and runs its list in order. A Forward takes
// forward_cost / v and a Backward backward_cost / v (v model chunks per rank, so a
// micro-batch's work over the whole pipeline is the same with and without interleaving); a
// split backward's BackwardWeight takes weight_share of the Backward's cost and its
// BackwardInput the rest.
// Sends take no time and never block: a send is issued at its rank's current time. A receive
// takes no time of its own but ends no earlier than the matching send was issued (same kind,
// micro-batch and virtual-stage pair; plus a transfer time where one is given), so the rank sits
// idle from reaching the receive until then. Ranks share no resource, so this discrete-event model
// is exact when each action is timed in dependency order, which is what the simulator does; it
// reports a deadlock when no rank can run its next action and some have not finished.
//
// It also checks that each action has its data (a Forward off virtual stage 0 has received its
// activation, a Backward follows its Forward and, off the last virtual stage, has received its
// gradient, a send follows the compute that produced it, nothing runs twice), and throws
// InternalError when one does not: such a list is a bug in the schedule, not a timing.
//
// Times: the makespan is when the last rank finishes; a rank's busy time is its compute time,
// its idle time makespan - busy (waits, plus the start before its first compute and the tail
// after its last); the bubble fraction is total idle / (stages x makespan). With uniform costs
// GPipe and 1F1B have the bubble (p - 1) / (M + p - 1).
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace ternion {

struct PipelineSimulation {
  bool deadlocked = false;
  // Where, one clause per stuck rank: "stage 1 blocks at action 4 of 30,
  // RecvGradient(m=0, chunk=0) from stage 2 chunk 0, which blocks at action 2 of 30"
  // (or "which has finished its list without sending it"). Empty without a deadlock.
  std::string deadlock;
  std::vector<int> blocked_at;  // per stage: index of the receive it is stuck on; -1 = finished

  double makespan = 0;
  std::vector<double> busy_time;  // per stage
  std::vector<double> idle_time;  // per stage: makespan - busy_time
  double bubble_fraction = 0;     // sum of idle_time / (stages x makespan)
  // Per stage: the most (micro-batch, chunk) pairs held at once, from their forward to their
  // Backward or BackwardWeight.
  std::vector<int> peak_activations;
  // Per stage, the actions that ran, in list order (all of them unless deadlocked).
  std::vector<std::vector<PipelineSpan>> spans;
};

// Simulates pipeline_schedule(kind, ...) on every stage (which validates the configuration).
PipelineSimulation simulate_pipeline(PipelineSchedule kind, int stages, int micro_batches,
                                     int virtual_stages, double forward_cost = 1.0,
                                     double backward_cost = 2.0, double weight_share = 0.5);

// Every pipeline rank's action list (validates the configuration first).
std::vector<std::vector<PipelineAction>> pipeline_schedules(PipelineSchedule kind, int stages,
                                                            int micro_batches, int virtual_stages);

// A stage's forward and backward of one micro-batch over all of its chunks (each chunk takes
// its 1/v share). Stages differ where the first holds the embedding and the last the head.
// weight_share: the parameter gradients' part of the backward (BackwardWeight), the rest being
// the input gradient's (BackwardInput); a half where the GEMMs dominate, each of which has
// one product for each.
struct StageCost {
  double forward = 1.0;
  double backward = 2.0;
  double weight_share = 0.5;
};

// With a cost per stage, and `transfer_time` from a send's issue to the earliest completion
// of its receive (a message's time on the link; 0 above).
PipelineSimulation simulate_pipeline_actions(
    const std::vector<std::vector<PipelineAction>>& stage_actions, int virtual_stages,
    const std::vector<StageCost>& costs, double transfer_time);

// Simulates the given lists, one per pipeline rank (stage_actions.size() stages), e.g. a
// schedule that was changed by hand.
PipelineSimulation simulate_pipeline_actions(
    const std::vector<std::vector<PipelineAction>>& stage_actions, int virtual_stages,
    double forward_cost = 1.0, double backward_cost = 2.0, double weight_share = 0.5);

}  // namespace ternion
