// What a rank of a run holds at its peak, estimated before the run by running the run itself
// on the meta device (framework/device.h), rank by rank on one process: the rank's model
// chunks, schedule, gradient reducer and optimizer are built as the run builds them, over
// layout-only groups that move nothing (ProcessGroups::layout_only), and one training step
// allocates and frees, in the run's order, everything a real step does: activations of every
// micro-batch the schedule keeps in flight, what recomputation keeps and rebuilds, reduction
// buckets, logits, temporaries. So nothing restates the model or the schedule.
//
// The figures are the CPU caching allocator's in-use bytes (its block sizes). What they miss:
// memory that is not a tensor (MPI's and NCCL's own buffers, cuBLAS/cuDNN workspaces,
// CUDA's context), host tensors made inside CPU kernels (bf16 inputs widened to f32), and
// the caching allocator's fragmentation, which `reserved_memory_mb` shows in the metrics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/op_cost.h"
#include "parallel/rank_layout.h"
#include "training/train_config.h"

namespace ternion {

struct MemoryEstimate {
  std::size_t parameters = 0;       // values, and their bf16 compute copies under mixed precision
  std::size_t gradients = 0;        // what lasts the step (a shard of them under ZeRO-2)
  std::size_t optimizer_state = 0;  // this rank's share under ZeRO
  std::size_t other_resident = 0;   // the rest held between steps: reduction buffers, rounding
  std::size_t step = 0;             // the step's most on top: activations, buckets, temporaries
  int contexts_in_flight = 1;       // most (micro-batch, chunk) activation sets held at once
  bool step_counted = true;         // false: the step was not run (estimate_memory's limit)
  std::size_t resident() const { return parameters + gradients + optimizer_state + other_resident; }
  std::size_t peak() const { return resident() + step; }
};

// Rank `rank` of `layout` running `config` (ConfigError etc. as the run would throw them).
// With `step_ops`, what the step's kernels did is counted there too (framework/op_cost.h):
// the planner's compute costs come from the same step as the memory. Where what is resident
// between steps already exceeds `resident_limit` bytes, the step is not run: the estimate is
// then a lower bound over the limit, and `step_ops` stays empty (the planner skips layouts that
// cannot fit so).
MemoryEstimate estimate_memory(const TrainConfig& config, const RankLayout& layout, int rank,
                               OpCostRecorder* step_ops = nullptr,
                               std::size_t resident_limit = SIZE_MAX);

// "1.93 GB = parameters 498 MB + gradients 498 MB + optimizer state 996 MB + buffers 0 B +
// step 1.2 GB (activations of at most 4 micro-batch chunks at once, buckets, temporaries)"
std::string describe(const MemoryEstimate& estimate);

}  // namespace ternion
