// What the ops of a step would cost, counted on the meta device (framework/device.h). Kernels
// check their operands and, given meta tensors, report their work here instead of doing it: a
// GEMM its shape, every other op the bytes it reads and writes. The planner
// (planner/step_model.h) runs a training step of the real model, schedule and optimizer on
// meta with a recorder in scope and prices what was counted, so its costs are the run's own
// op sequence rather than a restated formula of the model. With no recorder on the calling
// thread, reporting does nothing.
#pragma once

#include <compare>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace ternion {

// out [m, n] = a [m, k] @ b [k, n], operands of element_bytes (4 for f32, 2 for bf16).
// `fused`: a product whose traffic its kernel reports itself (attention's: inside a fused
// kernel the scores never go through memory; the cuBLAS path reports its squares' bytes).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  int element_bytes = 4;
  bool fused = false;
  auto operator<=>(const GemmShape&) const = default;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  // Each operand read once and the result written once: the least a GEMM can move.
  double bytes() const {
    if (fused) return 0;
    return element_bytes * (static_cast<double>(m) * static_cast<double>(k) +
                            static_cast<double>(k) * static_cast<double>(n) +
                            static_cast<double>(m) * static_cast<double>(n));
  }
};

// Which part of the step an op belongs to: the pipeline's forward and backward of a
// micro-batch (recomputation's repeated forward falls in the backward, where it runs, and so
// do the reductions the gradient reducer starts from the backward's hooks), and everything
// else (the pipeline's sends, finishing the reductions, clipping, the optimizer).
enum class OpPhase { forward, backward, other };

// Communication a rank started on a group. Bytes are each call's buffer on this rank: an
// all-reduce's or broadcast's tensor, an all-gather's output, a reduce-scatter's input, what
// a send or an exchange sends (receives are their senders' to count).
enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, broadcast, send };
const char* collective_kind_name(CollectiveKind kind);

struct CollectiveTotals {
  double calls = 0;
  double bytes = 0;
  double largest = 0;  // bytes of the largest call
};

struct OpCounts {
  std::map<GemmShape, double> gemms;  // shape -> how many ran
  double memory_bytes = 0;            // read and written by the ops that are not GEMMs
  // (group name, kind) -> what was started on it
  std::map<std::pair<std::string, CollectiveKind>, CollectiveTotals> collectives;
  double gemm_flops() const;
};

// What was counted, by phase. Counting happens while an OpCostScope holds it.
class OpCostRecorder {
 public:
  const OpCounts& counts(OpPhase phase) const { return counts_[static_cast<int>(phase)]; }

  // Called by the reporting functions below.
  void add_gemm(const GemmShape& shape, double count);
  void add_memory_bytes(double bytes);
  void add_collective(const std::string& group, const std::vector<int>& members,
                      CollectiveKind kind, double bytes);
  // The world ranks of each group that communicated (as its communicator knew them).
  const std::map<std::string, std::vector<int>>& group_members() const { return members_; }
  // The GEMMs and bytes of a split backward's deferred parameter gradients (the zero-bubble
  // schedule's W), counted here as well as in their phase, the backward's: what the planner
  // needs to time W apart from B. Empty where the backward ran whole.
  const OpCounts& weight_gradients() const { return weight_gradients_; }
  OpPhase phase = OpPhase::other;      // set by OpPhaseScope
  bool in_weight_gradients = false;    // set by WeightGradientScope

 private:
  OpCounts counts_[3];
  OpCounts weight_gradients_;
  std::map<std::string, std::vector<int>> members_;
};

// Counts this thread's reported ops into `recorder` while it lives (one at a time per thread).
class OpCostScope {
 public:
  explicit OpCostScope(OpCostRecorder& recorder);
  ~OpCostScope();
  OpCostScope(const OpCostScope&) = delete;
  OpCostScope& operator=(const OpCostScope&) = delete;
};

// Attributes the ops reported in its lifetime to `phase` (nests; restores the previous).
class OpPhaseScope {
 public:
  explicit OpPhaseScope(OpPhase phase);
  ~OpPhaseScope();
  OpPhaseScope(const OpPhaseScope&) = delete;
  OpPhaseScope& operator=(const OpPhaseScope&) = delete;

 private:
  OpPhase previous_ = OpPhase::other;
};

// Marks the ops reported in its lifetime as a split backward's parameter gradients.
class WeightGradientScope {
 public:
  WeightGradientScope();
  ~WeightGradientScope();
  WeightGradientScope(const WeightGradientScope&) = delete;
  WeightGradientScope& operator=(const WeightGradientScope&) = delete;
};

// What kernels call on meta tensors; no-ops without a recorder.
void record_gemm(const GemmShape& shape, double count = 1);
void record_memory_bytes(double bytes);
void record_collective(const std::string& group, const std::vector<int>& members,
                       CollectiveKind kind, double bytes);
bool op_costs_recorded();  // whether a recorder is in scope on this thread

// For a kernel's early return on the meta device: true when the first tensor is a meta
// tensor, after reporting the bytes of all of them (each read or written once):
//   if (counted_on_meta({&out, &x})) return;
bool counted_on_meta(std::initializer_list<const Tensor*> touched);

}  // namespace ternion
