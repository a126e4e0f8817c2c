#include "training/model_stage.h"

#include "framework/op_cost.h"
#include "layers/lm_head.h"

namespace ternion {

ModelStage::ModelStage(std::vector<GptModel*> chunks, const std::vector<TokenBatch>& batches,
                       Mode mode, const MicroBatchInfo& info, std::int64_t sequence_parts)
    : chunks_(std::move(chunks)),
      batches_(batches),
      mode_(mode),
      info_(info),
      sequence_parts_(sequence_parts) {
  TN_CHECK(!chunks_.empty(), "a pipeline stage without model chunks");
  info_.training = mode == Mode::train;
  TN_CHECK(mode != Mode::train || info_.loss_weight.has_value(),
           "a training stage needs the backward's loss weight");
}

Shape ModelStage::boundary_shape(int micro_batch) const {
  const Tensor& tokens = batches_.at(static_cast<std::size_t>(micro_batch)).inputs;
  return {tokens.size(0), tokens.size(1) / sequence_parts_, chunks_.front()->config().d_model};
}

Tensor ModelStage::forward(int micro_batch, int chunk, const Tensor& input) {
  const OpPhaseScope phase(OpPhase::forward);
  const TokenBatch& batch = batches_.at(static_cast<std::size_t>(micro_batch));
  GptModel& model = *chunks_.at(static_cast<std::size_t>(chunk));
  MicroBatchInfo info = info_;
  info.micro_batch = micro_batch;
  info.sample_offset = info_.sample_offset + micro_batch * batch.inputs.size(0);
  auto ctx = std::make_unique<ActivationContext>(info);
  const Tensor& in = model.chunk().has_embedding ? batch.inputs : input;
  if (mode_ == Mode::logits) {
    Tensor out = model.forward_chunk_logits(in, *ctx);
    if (!model.chunk().has_head) return out;
    logits_ = out;
    return Tensor();
  }
  Tensor losses;
  Tensor out = model.forward_chunk(in, batch.targets, *ctx, &losses);
  if (losses.defined()) losses_.push_back(losses);
  if (mode_ == Mode::train) {
    const bool fresh = contexts_.emplace(std::pair{micro_batch, chunk}, std::move(ctx)).second;
    TN_CHECK(fresh, "micro-batch ", micro_batch, " chunk ", chunk, " forwarded twice");
  }
  return out;
}

ModelStage::Contexts::iterator ModelStage::context_of(int micro_batch, int chunk,
                                                     const char* what) {
  TN_CHECK(mode_ == Mode::train, what, " of a forward-only stage");
  const auto it = contexts_.find({micro_batch, chunk});
  TN_CHECK(it != contexts_.end(), what, " of micro-batch ", micro_batch, " chunk ", chunk,
           " before its forward");
  return it;
}

Tensor ModelStage::backward(int micro_batch, int chunk, const Tensor& grad_output) {
  const OpPhaseScope phase(OpPhase::backward);
  const auto it = context_of(micro_batch, chunk, "backward");
  GptModel& model = *chunks_.at(static_cast<std::size_t>(chunk));
  Tensor dinput = model.backward_chunk(grad_output, *info_.loss_weight, *it->second);
  TN_CHECK(it->second->empty(), "activations left over after backward");
  contexts_.erase(it);
  return dinput;
}

Tensor ModelStage::backward_input(int micro_batch, int chunk, const Tensor& grad_output) {
  const OpPhaseScope phase(OpPhase::backward);
  const auto it = context_of(micro_batch, chunk, "the input gradient");
  GptModel& model = *chunks_.at(static_cast<std::size_t>(chunk));
  return model.backward_input_chunk(grad_output, *info_.loss_weight, *it->second);
}

// Counted as backward (a plain backward does the same work), and apart as W for the planner.
void ModelStage::backward_weight(int micro_batch, int chunk) {
  const OpPhaseScope phase(OpPhase::backward);
  const WeightGradientScope weight_gradients;
  const auto it = context_of(micro_batch, chunk, "the weight gradients");
  chunks_.at(static_cast<std::size_t>(chunk))->backward_weight_chunk(*it->second);
  TN_CHECK(it->second->empty(), "activations left over after the weight gradients");
  contexts_.erase(it);
}

double ModelStage::loss_sum() const {
  double sum = 0.0;
  for (const Tensor& losses : losses_) sum += summed_loss(losses);
  return sum;
}

}  // namespace ternion
