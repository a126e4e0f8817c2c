// This rank's model chunks as a pipeline stage (parallel/pipeline_stage.h), over one set of
// micro-batches: what the pipeline executor runs on several ranks, and what the trainer runs
// directly, chunk 0 alone, on one. Each (micro-batch, chunk) has its own ActivationContext
// from its forward to its backward.
//   train     forward and backward; the last virtual stage keeps each micro-batch's losses
//   evaluate  forward only (no dropout, nothing kept for a backward); the losses as in train
//   logits    forward only; the last virtual stage keeps the logits [B, T, padded_vocab]
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "data/batch_sampler.h"
#include "layers/gpt_model.h"
#include "parallel/pipeline_stage.h"

namespace ternion {

class ModelStage : public PipelineStage {
 public:
  enum class Mode { train, evaluate, logits };

  // `batches[m]`: micro-batch m's tokens on the device (logits: the inputs alone). `info`: the
  // first micro-batch's MicroBatchInfo (in training its step, seed, sample offset and loss
  // weight); micro-batch m starts m micro-batches further. `sequence_parts`: the
  // tensor-parallel size under sequence parallelism, else 1.
  ModelStage(std::vector<GptModel*> chunks, const std::vector<TokenBatch>& batches, Mode mode,
             const MicroBatchInfo& info, std::int64_t sequence_parts);

  int chunks() const override { return static_cast<int>(chunks_.size()); }
  Shape boundary_shape(int micro_batch) const override;
  Tensor forward(int micro_batch, int chunk, const Tensor& input) override;
  Tensor backward(int micro_batch, int chunk, const Tensor& grad_output) override;
  Tensor backward_input(int micro_batch, int chunk, const Tensor& grad_output) override;
  void backward_weight(int micro_batch, int chunk) override;

  // The summed losses of this rank's last-virtual-stage micro-batches, in order (0 elsewhere);
  // reading them waits for the device, so a step reads them once, after queueing its work.
  double loss_sum() const;
  const Tensor& logits() const { return logits_; }  // logits mode, last virtual stage

 private:
  std::vector<GptModel*> chunks_;
  const std::vector<TokenBatch>& batches_;
  Mode mode_;
  MicroBatchInfo info_;
  std::int64_t sequence_parts_;
  using Contexts = std::map<std::pair<int, int>, std::unique_ptr<ActivationContext>>;
  Contexts::iterator context_of(int micro_batch, int chunk, const char* what);
  Contexts contexts_;
  std::vector<Tensor> losses_;  // each micro-batch's per-token losses, still on the device
  Tensor logits_;
};

}  // namespace ternion
