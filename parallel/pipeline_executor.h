// Runs a pipeline schedule (parallel/pipeline_schedule.h) on this rank's model chunks.
//
// Each rank of a pipeline group of p ranks holds v model chunks; chunk c of pipeline rank s
// is virtual stage c * p + s. Activations flow from virtual stage u to u + 1, gradients back.
// The executor walks this rank's action list in order: a forward or backward runs one chunk
// on one micro-batch, each (micro-batch, chunk) with its own ActivationContext; a send is
// asynchronous (its buffer is kept until the step ends), a receive blocks until the tensor
// arrives. Message shapes are known from the config ([micro_batch, seq / (sequence-parallel
// tp), d_model]), so no size handshake is needed; a message's tag names its micro-batch and
// receiving chunk, so messages cannot be confused.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "data/batch_sampler.h"
#include "layers/gpt_model.h"
#include "parallel/comm/communicator.h"
#include "parallel/pipeline_schedule.h"

namespace ternion {

// One span of a rank's timeline (seconds since the step started), for traces.
struct PipelineSpan {
  double start = 0.0, end = 0.0;
  PipelineAction action{PipelineAction::Kind::Forward, 0, 0};
};

struct PipelineStepResult {
  double step_start = 0.0;     // steady-clock seconds (shared by the processes of a node)
  double loss_sum = 0.0;       // summed over this rank's last-stage micro-batches (0 elsewhere)
  int peak_live_contexts = 0;  // most (micro-batch, chunk) activation sets held at once
  std::vector<PipelineSpan> spans;
};

class PipelineExecutor {
 public:
  // `chunks[c]` is this rank's chunk c; `pipeline` the pipeline group (its rank is the
  // pipeline rank). Between chunks a batch of tokens [B, T] travels as hidden states
  // [B, T / sequence_parts, d_model] (sequence_parts: the tensor-parallel size under sequence
  // parallelism, else 1).
  PipelineExecutor(std::vector<GptModel*> chunks, Communicator& pipeline, std::int64_t d_model,
                   std::int64_t sequence_parts);
  // The dtype and device of the activations and gradients that cross stages (default: f32 on
  // the CPU); every stage of a run uses the same.
  void set_activation_format(DType dtype, Device device) {
    activation_dtype_ = dtype;
    device_ = device;
  }

  // One training step: forward and backward of every micro-batch; parameter gradients
  // accumulate. `info` is the step's MicroBatchInfo template (step, seed, and the sample
  // offset of this rank's first sequence); micro-batch m starts m micro-batches further.
  // info.loss_weight, where set, must be `loss_weight` (the head then computes its gradient in
  // the forward).
  PipelineStepResult train(const std::vector<PipelineAction>& actions,
                           const std::vector<TokenBatch>& batches, const MicroBatchInfo& info,
                           float loss_weight);
  // Forward only, micro-batch by micro-batch (evaluation): the summed loss on the ranks of the
  // last virtual stage, 0 elsewhere.
  double evaluate(const std::vector<TokenBatch>& batches);
  // Forward only of one input (generation): the logits on the last virtual stage's rank,
  // undefined elsewhere.
  Tensor logits(const Tensor& tokens);

 private:
  // The pipeline rank and chunk of the virtual stages after and before (stage, chunk).
  std::pair<int, int> next_of(int chunk) const;
  std::pair<int, int> previous_of(int chunk) const;
  int tag(int kind, int micro_batch, int receiving_chunk) const;
  // Once, before the first message: connects each neighbour pair both ways (NCCL needs it).
  void connect_neighbours();
  Tensor receive(int kind, int micro_batch, int chunk, int from_rank, const Tensor& tokens);

  std::vector<GptModel*> chunks_;
  Communicator& pipeline_;
  std::int64_t d_model_;
  DType activation_dtype_ = DType::F32;
  Device device_ = Device::cpu();
  std::int64_t sequence_parts_;
  int stages_;
  int stage_;
  bool connected_ = false;
};

}  // namespace ternion
