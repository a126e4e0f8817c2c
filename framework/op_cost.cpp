#include "framework/op_cost.h"

#include <algorithm>

#include "framework/error.h"

namespace ternion {

namespace {
thread_local OpCostRecorder* active_recorder = nullptr;
}  // namespace

double OpCounts::gemm_flops() const {
  double flops = 0;
  for (const auto& [shape, count] : gemms) flops += count * shape.flops();
  return flops;
}

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all-reduce";
    case CollectiveKind::all_gather: return "all-gather";
    case CollectiveKind::reduce_scatter: return "reduce-scatter";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::send: return "send";
  }
  return "?";
}

OpCostScope::OpCostScope(OpCostRecorder& recorder) {
  TN_CHECK(active_recorder == nullptr, "an OpCostRecorder is already counting on this thread");
  active_recorder = &recorder;
}

OpCostScope::~OpCostScope() { active_recorder = nullptr; }

void OpCostRecorder::add_gemm(const GemmShape& shape, double count) {
  counts_[static_cast<int>(phase)].gemms[shape] += count;
  if (in_weight_gradients) weight_gradients_.gemms[shape] += count;
}

void OpCostRecorder::add_memory_bytes(double bytes) {
  counts_[static_cast<int>(phase)].memory_bytes += bytes;
  if (in_weight_gradients) weight_gradients_.memory_bytes += bytes;
}

void OpCostRecorder::add_collective(const std::string& group, const std::vector<int>& members,
                                    CollectiveKind kind, double bytes) {
  CollectiveTotals& totals = counts_[static_cast<int>(phase)].collectives[{group, kind}];
  totals.calls += 1;
  totals.bytes += bytes;
  totals.largest = std::max(totals.largest, bytes);
  members_.try_emplace(group, members);
}

OpPhaseScope::OpPhaseScope(OpPhase phase) {
  if (active_recorder == nullptr) return;
  previous_ = active_recorder->phase;
  active_recorder->phase = phase;
}

OpPhaseScope::~OpPhaseScope() {
  if (active_recorder != nullptr) active_recorder->phase = previous_;
}

WeightGradientScope::WeightGradientScope() {
  if (active_recorder != nullptr) active_recorder->in_weight_gradients = true;
}

WeightGradientScope::~WeightGradientScope() {
  if (active_recorder != nullptr) active_recorder->in_weight_gradients = false;
}

void record_gemm(const GemmShape& shape, double count) {
  if (active_recorder != nullptr) active_recorder->add_gemm(shape, count);
}

void record_memory_bytes(double bytes) {
  if (active_recorder != nullptr) active_recorder->add_memory_bytes(bytes);
}

void record_collective(const std::string& group, const std::vector<int>& members,
                       CollectiveKind kind, double bytes) {
  if (active_recorder != nullptr) active_recorder->add_collective(group, members, kind, bytes);
}

bool op_costs_recorded() { return active_recorder != nullptr; }

bool counted_on_meta(std::initializer_list<const Tensor*> touched) {
  if (touched.size() == 0 || !(*touched.begin())->device().is_meta()) return false;
  if (active_recorder != nullptr) {
    double bytes = 0;
    for (const Tensor* t : touched) bytes += static_cast<double>(t->nbytes());
    active_recorder->add_memory_bytes(bytes);
  }
  return true;
}

}  // namespace ternion
