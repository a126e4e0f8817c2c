// A pipeline step's timeline as a Chrome trace (JSON, viewable in Perfetto or
// chrome://tracing; tools/trace_to_png.py draws it as a picture).
//
// Every rank contributes its spans — forward, backward, send, recv — and the gaps between
// them, where it waited, become idle spans; time is steady-clock time, shared by the
// processes of one node (on several nodes each node's timeline starts at its own earliest
// step start, since their clocks are not comparable). Rank 0
// writes the file (under a temporary name, then renamed) and computes the measured bubble
// fraction: 1 - (forward + backward time) / (ranks x the step's span).
#pragma once

#include <string>

#include "parallel/process_groups.h"
#include "parallel/pipeline_executor.h"

namespace ternion {

// Collective over the world of `groups`; returns the measured bubble fraction on rank 0
// (-1 elsewhere).
double write_pipeline_trace(const std::string& path, const PipelineStepResult& mine,
                            const ProcessGroups& groups, std::int64_t step);

}  // namespace ternion
