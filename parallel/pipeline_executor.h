// Runs a pipeline schedule (parallel/pipeline_schedule.h) on this rank's PipelineStage
// (parallel/pipeline_stage.h).
//
// Each rank of a pipeline group of p ranks holds v chunks; chunk c of pipeline rank s is
// virtual stage c * p + s. Activations flow from virtual stage u to u + 1, gradients back; the
// peer of each send and receive is the schedule's own (pipeline_peer). The executor walks this
// rank's action list in order: a forward or backward runs one chunk on one micro-batch; a send
// is asynchronous (its buffer is kept until the step ends), a receive blocks until the tensor
// arrives. Message shapes are the stage's boundary shapes, so no size handshake is needed; a
// message's tag names its micro-batch and receiving chunk, so messages cannot be confused.
#pragma once

#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_stage.h"

namespace ternion {

struct PipelineStepResult {
  double step_start = 0.0;     // steady-clock seconds (shared by the processes of a node)
  int peak_live_contexts = 0;  // most (micro-batch, chunk) activation sets held at once
  std::vector<PipelineSpan> spans;
};

class PipelineExecutor {
 public:
  // `pipeline`: the pipeline group (its rank is the pipeline rank), `virtual_stages` chunks on
  // each of its ranks. Activations and gradients cross stages in `activation_dtype` on
  // `device`; every stage of a run uses the same.
  PipelineExecutor(Communicator& pipeline, int virtual_stages, DType activation_dtype,
                   Device device);

  // One training step: the schedule's actions for this rank, in order.
  PipelineStepResult train(const std::vector<PipelineAction>& actions, PipelineStage& stage);
  // Forward only, micro-batch by micro-batch, each through every virtual stage in turn
  // (evaluation, generation): no activation is kept for a backward.
  void forward_only(int micro_batches, PipelineStage& stage);

 private:
  int tag(int kind, int micro_batch, int receiving_chunk) const;
  // Once, before the first message: connects each neighbour pair both ways (NCCL needs it).
  void connect_neighbours();
  Tensor receive(const PipelineAction& action, const Shape& shape);
  PipelinePeer peer(const PipelineAction& action) const {
    return pipeline_peer(action, stages_, virtual_stages_, stage_);
  }

  Communicator& pipeline_;
  int virtual_stages_;
  DType activation_dtype_;
  Device device_;
  int stages_;
  int stage_;
  bool connected_ = false;
};

}  // namespace ternion
