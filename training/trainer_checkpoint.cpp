// The trainer's state as checkpoint tensors (training/checkpoint.h does the files): each
// parameter under "model/NAME", each optimizer state under "optim/KIND/NAME", every element
// saved once however the ranks replicate it, and loaded into any layout.
#include <algorithm>

#include "parallel/comm/comm_backend.h"
#include "training/checkpoint.h"
#include "training/trainer.h"

namespace ternion {

void Trainer::save_checkpoint(std::int64_t step) {
  check_communication_health();  // never save what a failed collective left behind
  const int dp_rank = groups_.dp_rank();
  const bool sharded = reducer_ && reducer_->shards_optimizer_state();
  auto tied = [&](const Parameter* p) {
    return std::find(tied_copies_.begin(), tied_copies_.end(), p) != tied_copies_.end();
  };
  // Each element once: replicated copies (over data ranks, over tensor ranks, the tied
  // embedding's second copy) are left to one owner.
  std::vector<ShardedTensor> mine;
  for (Parameter* p : parameters_) {
    if (tied(p) || dp_rank != 0 || (!p->is_sharded() && tp_.rank() != 0)) continue;
    mine.push_back({"model/" + p->name, p, p->value.view({-1}), 0, p->value.numel()});
  }
  const std::vector<std::string> kinds = optimizer_->state_kinds();
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const ParameterSegment& s = segments_[i];
    if (tied(s.param) || (!sharded && dp_rank != 0) || (!s.param->is_sharded() && tp_.rank() != 0))
      continue;
    const std::vector<Tensor> state = optimizer_->state_of(i);
    for (std::size_t j = 0; j < kinds.size(); ++j)
      mine.push_back({"optim/" + kinds[j] + "/" + s.param->name, s.param, state[j], s.begin, s.end});
  }
  ::ternion::save_checkpoint(config_, tokenizer_, step, checkpoint_retention_, mine,
                             &groups_.world());
}

std::int64_t Trainer::load_checkpoint(const std::string& dir) {
  std::vector<ShardedTensor> targets;
  for (Parameter* p : parameters_) targets.push_back({"model/" + p->name, p, Tensor(), 0, p->value.numel()});
  const std::vector<std::string> kinds = optimizer_->state_kinds();
  for (std::size_t i = 0; i < segments_.size(); ++i)
    for (const std::string& kind : kinds)
      targets.push_back({"optim/" + kind + "/" + segments_[i].param->name, segments_[i].param,
                         Tensor(), segments_[i].begin, segments_[i].end});
  const std::int64_t step =
      ::ternion::load_checkpoint(dir, config_.model, config_.optimizer.type, targets);
  std::size_t t = 0;
  for (Parameter* p : parameters_) p->value.view({-1}).copy_from(targets[t++].data);
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    std::vector<Tensor> state = optimizer_->state_of(i);
    for (Tensor& s : state) s.copy_from(targets[t++].data);
  }
  return step;
}

}  // namespace ternion
