#include "training/memory_estimate.h"

#include <optional>
#include <string>
#include <unordered_set>

#include "framework/allocator.h"
#include "framework/device_runtime.h"
#include "framework/error.h"
#include "framework/logging.h"
#include "layers/layer_registry.h"
#include "training/trainer.h"

namespace ternion {

namespace {

// A user's block runs here on shape-only tensors before the run trains: what its code throws
// is said as its block type's, with the rule it broke, not as an internal error of ours.
void run_meta_step(Trainer& trainer, const std::string& block) {
  if (LayerRegistry::instance().is_built_in(block)) {
    trainer.train_step(1);
    return;
  }
  if (const auto failed = failure_of_user_code([&] { trainer.train_step(1); }))
    TN_THROW(ConfigError, "block type '", block,
             "' failed in the memory estimate, a training step on shape-only tensors (device "
             "meta) that every run takes before training: ", *failed,
             " (a block's own loops over tensor data must skip a meta tensor, "
             "x.device().is_meta(), as the ops do: CONTRIBUTING.md, 'A new layer or block')");
}

}  // namespace

MemoryEstimate estimate_memory(const TrainConfig& config, const RankLayout& layout, int rank,
                               OpCostRecorder* step_ops, std::size_t resident_limit) {
  const std::unique_ptr<ProcessGroups> groups = ProcessGroups::layout_only(layout, rank);
  const Device meta = Device::meta();
  const std::size_t before = device_memory_stats(meta).in_use;  // other meta tensors alive
  Trainer trainer(config, groups.get(), Trainer::Build::meta);

  MemoryEstimate estimate;
  std::unordered_set<const Parameter*> seen;
  for (const Parameter* p : trainer.parameters()) {
    if (!seen.insert(p).second) continue;
    estimate.parameters += CachingAllocator::block_size(p->value.nbytes());
    if (p->compute.defined())
      estimate.parameters += CachingAllocator::block_size(p->compute.nbytes());
  }
  estimate.gradients = trainer.gradient_bytes();
  estimate.optimizer_state = trainer.optimizer_state_bytes();
  const std::size_t resident = device_memory_stats(meta).in_use - before;
  const std::size_t counted = estimate.parameters + estimate.gradients + estimate.optimizer_state;
  estimate.other_resident = resident > counted ? resident - counted : 0;
  if (estimate.resident() > resident_limit) {
    estimate.step_counted = false;
    return estimate;
  }
  // The step's peak is measured from the in-use figure at its start, as the run measures it.
  {
    std::optional<OpCostScope> counting;
    if (step_ops != nullptr) counting.emplace(*step_ops);
    run_meta_step(trainer, config.model.block);
  }
  const DeviceMemoryStats after = device_memory_stats(meta);
  estimate.step = after.peak - before - resident;
  estimate.contexts_in_flight = std::max(1, trainer.last_pipeline_step().peak_live_contexts);
  return estimate;
}

std::string describe(const MemoryEstimate& e) {
  return detail::concat(
      human_bytes(static_cast<double>(e.peak())), " = parameters ",
      human_bytes(static_cast<double>(e.parameters)), " + gradients ",
      human_bytes(static_cast<double>(e.gradients)), " + optimizer state ",
      human_bytes(static_cast<double>(e.optimizer_state)), " + buffers ",
      human_bytes(static_cast<double>(e.other_resident)), " + step ",
      human_bytes(static_cast<double>(e.step)), " (activations of at most ",
      count_of(e.contexts_in_flight, "micro-batch chunk", "micro-batch chunks"),
      " at once, buckets, temporaries)");
}

}  // namespace ternion
