// The trainer's state as checkpoint tensors (training/checkpoint.h does the files): each
// parameter under "model/NAME", each optimizer state under "optim/KIND/NAME", every element
// saved once however the ranks replicate it, and loaded into any layout. The gradient
// reduction's state (PowerSGD's residuals and Q) is each rank's own, under a name that says
// which rank of which layout saved it: a resume in that layout restores it, another layout
// starts it afresh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <sstream>

#include "framework/logging.h"
#include "parallel/comm/comm_backend.h"
#include "training/checkpoint.h"
#include "training/trainer.h"

namespace ternion {

namespace {

std::string reduction_state_prefix(const TrainConfig& c, int world_rank) {
  const ParallelConfig& p = c.parallel;
  std::ostringstream prefix;
  prefix << "reduction/" << p.grad_compression << "_rank" << p.powersgd_rank << "/data" << p.data
         << ".tensor" << p.tensor << ".pipeline" << p.pipeline << ".virtual" << p.virtual_stages
         << "/rank_" << world_rank << "/";
  return prefix.str();
}

// A tensor of one rank, unsharded, as the checkpoint files describe tensors.
Parameter whole_tensor(const std::string& name, const Tensor& value) {
  Parameter p;
  p.name = name;
  p.value = value;
  p.global_shape = value.shape();
  return p;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The bytes of a tensor's [begin, end) in a checkpoint (which holds f32).
double checkpoint_bytes(const ShardedTensor& t) {
  return static_cast<double>(t.end - t.begin) * static_cast<double>(sizeof(float));
}

}  // namespace

bool Trainer::saves_value(const Parameter* p) const {
  const bool tied =
      std::find(tied_copies_.begin(), tied_copies_.end(), p) != tied_copies_.end();
  return !tied && groups_.dp_rank() == 0 && (p->is_sharded() || tp_.rank() == 0);
}

bool Trainer::saves_state(const Parameter* p) const {
  const bool tied =
      std::find(tied_copies_.begin(), tied_copies_.end(), p) != tied_copies_.end();
  const bool sharded = reducer_ && reducer_->shards_optimizer_state();
  return !tied && (sharded || groups_.dp_rank() == 0) && (p->is_sharded() || tp_.rank() == 0);
}

std::string Trainer::CheckpointTransfer::str() const {
  char text[96];
  std::snprintf(text, sizeof text, "%.1f MB in %.2f s, %.0f MB/s", bytes / 1e6, seconds,
                seconds > 0 ? bytes / 1e6 / seconds : 0.0);
  return text;
}

Trainer::CheckpointTransfer Trainer::save_checkpoint(std::int64_t step) {
  check_communication_health();  // never save what a failed collective left behind
  const double start = seconds_now();
  std::vector<ShardedTensor> mine;
  for (Parameter* p : parameters_) {
    if (!saves_value(p)) continue;
    mine.push_back({"model/" + p->name, p, p->value.view({-1}), 0, p->value.numel()});
  }
  const std::vector<std::string> kinds = optimizer_->state_kinds();
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const ParameterSegment& s = segments_[i];
    if (!saves_state(s.param)) continue;
    const std::vector<Tensor> state = optimizer_->state_of(i);
    for (std::size_t j = 0; j < kinds.size(); ++j)
      mine.push_back(
          {"optim/" + kinds[j] + "/" + s.param->name, s.param, state[j], s.begin, s.end});
  }
  std::deque<Parameter> whole;  // the reduction state's descriptions, kept through the save
  if (reducer_) {
    const std::string prefix = reduction_state_prefix(config_, groups_.world().rank());
    for (const auto& [name, tensor] : reducer_->reduction().state(device_)) {
      whole.push_back(whole_tensor(prefix + name, tensor));
      mine.push_back({prefix + name, &whole.back(), tensor.view({-1}), 0, tensor.numel()});
    }
  }
  ::ternion::save_checkpoint(config_, tokenizer_, step, updates_, checkpoint_retention_, mine,
                             &groups_.world());
  double bytes = 0;
  for (const ShardedTensor& t : mine) bytes += checkpoint_bytes(t);
  return checkpoint_transfer(bytes, seconds_now() - start);
}

std::int64_t Trainer::load_checkpoint(const std::string& dir) {
  const double start = seconds_now();
  // Each target is the tensor it is loaded into.
  std::vector<ShardedTensor> targets;
  for (Parameter* p : parameters_)
    targets.push_back({"model/" + p->name, p, p->value.view({-1}), 0, p->value.numel()});
  const std::vector<std::string> kinds = optimizer_->state_kinds();
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const std::vector<Tensor> state = optimizer_->state_of(i);
    for (std::size_t k = 0; k < kinds.size(); ++k)
      targets.push_back({"optim/" + kinds[k] + "/" + segments_[i].param->name, segments_[i].param,
                         state[k].view({-1}), segments_[i].begin, segments_[i].end});
  }
  std::vector<std::pair<std::string, Tensor>> reduction_state;
  if (reducer_) reduction_state = reducer_->reduction().state(device_);
  const std::string prefix = reduction_state_prefix(config_, groups_.world().rank());
  // Each rank's own, whole: restored where the checkpoint holds this rank's of the same shapes
  // (the same layout, PowerSGD rank and padded vocabulary).
  bool restores_reduction = !reduction_state.empty();
  if (restores_reduction) {
    const std::map<std::string, Shape> saved = checkpoint_tensor_shapes(dir);
    for (const auto& [name, tensor] : reduction_state) {
      const auto found = saved.find(prefix + name);
      restores_reduction &= found != saved.end() && found->second == tensor.shape();
    }
  }
  std::deque<Parameter> whole;
  if (restores_reduction) {
    for (const auto& [name, tensor] : reduction_state) {
      whole.push_back(whole_tensor(prefix + name, tensor));
      targets.push_back({prefix + name, &whole.back(), tensor.view({-1}), 0, tensor.numel()});
    }
  }
  const CheckpointMeta meta =
      ::ternion::load_checkpoint(dir, config_.model, config_.optimizer.type, targets);
  const std::int64_t step = meta.step;
  updates_ = meta.updates;
  // What this rank would save of it, so that a load and a save of one layout count alike.
  double bytes = 0;
  for (const ShardedTensor& target : targets) {
    const bool optimizer_state = target.name.rfind("optim/", 0) == 0;
    const bool reduction_state = target.name.rfind("reduction/", 0) == 0;
    if (reduction_state || (optimizer_state ? saves_state(target.param)
                                            : saves_value(target.param)))
      bytes += checkpoint_bytes(target);
  }
  resume_transfer_ = checkpoint_transfer(bytes, seconds_now() - start);
  if (!restores_reduction && !reduction_state.empty() &&
      step > config_.parallel.powersgd_start_step) {
    log_info("ternion: PowerSGD's error feedback and Q start afresh: checkpoint '", dir,
             "' holds none of this layout's (data ", config_.parallel.data, " x tensor ",
             config_.parallel.tensor, " x pipeline ", config_.parallel.pipeline, ", PowerSGD rank ",
             config_.parallel.powersgd_rank, ", vocabulary padded to ",
             config_.model.padded_vocab_size(),
             "), so this run's losses part from those the saved run would have logged");
  }
  if (reducer_) reducer_->reduction().resume_after(step);
  return step;
}

}  // namespace ternion
