// A pipeline step's timeline as a Chrome trace (JSON, viewable in Perfetto or
// chrome://tracing; tools/trace_to_png.py draws it as a picture).
//
// Every rank contributes its spans — forward, backward, send, recv — and the gaps between
// them, where it waited, become idle spans; time is steady-clock time, shared by the
// processes of one node (on several nodes each node's timeline starts at its own earliest
// step start, since their clocks are not comparable). Rank 0
// writes the file (under a temporary name, then renamed) and computes the measured bubble
// fraction: 1 - (compute time) / (ranks x the step's span).
#pragma once

#include <string>

#include "parallel/process_groups.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_simulator.h"

namespace ternion {

struct TracedStep {
  double bubble = -1.0;  // measured bubble fraction
  // Per pipeline stage, averaged over its ranks: the compute of one micro-batch (all chunks),
  // the split backward's W share where the schedule split it (else 0.5) — what the simulator
  // (parallel/pipeline_simulator.h) takes to say what the schedule alone would leave idle.
  std::vector<StageCost> stage_costs;
};

// Collective over the world of `groups`; rank 0 writes the file and returns the measured
// step (elsewhere: bubble -1, no costs). `micro_batches`: the step's count per data rank.
TracedStep write_pipeline_trace(const std::string& path, const PipelineStepResult& mine,
                                const ProcessGroups& groups, std::int64_t step,
                                int micro_batches);

}  // namespace ternion
