// What the pipeline executor (parallel/pipeline_executor.h) runs on one rank: this rank's
// chunks of the model, one per virtual stage it holds, each with a forward and a backward per
// micro-batch. The executor moves hidden states and their gradients between the ranks; the
// stage computes, keeps each micro-batch's saved activations from its forward to its backward,
// reads the micro-batch's tokens itself (the first virtual stage its inputs, the last its
// targets) and keeps the losses, so the executor knows nothing of the model, the data or the
// loss. One rank is the one-stage case: every chunk here, nothing to send.
#pragma once

#include "framework/tensor.h"

namespace ternion {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  // Chunks on this rank (virtual stages: chunk c of pipeline rank s is virtual stage
  // c * pipeline size + s).
  virtual int chunks() const = 0;
  // The hidden states micro-batch `micro_batch` passes between virtual stages:
  // [batch, seq / sequence-parallel parts, d_model].
  virtual Shape boundary_shape(int micro_batch) const = 0;
  // Chunk `chunk` on micro-batch `micro_batch`. `input`: the previous virtual stage's hidden
  // states (undefined on virtual stage 0, which reads tokens). Returns this chunk's hidden
  // states for the next virtual stage (undefined on the last, which computes the loss).
  virtual Tensor forward(int micro_batch, int chunk, const Tensor& input) = 0;
  // `grad_output`: the gradient of forward's output (undefined on the last virtual stage,
  // which starts from its loss). Returns the gradient of forward's input (undefined on
  // virtual stage 0); parameter gradients accumulate.
  virtual Tensor backward(int micro_batch, int chunk, const Tensor& grad_output) = 0;
  // backward in two (the zero-bubble schedule): backward_input returns the input's gradient
  // and keeps the parameter gradients' work, which backward_weight does later. Together
  // they give backward's gradients.
  virtual Tensor backward_input(int micro_batch, int chunk, const Tensor& grad_output) = 0;
  virtual void backward_weight(int micro_batch, int chunk) = 0;
};

}  // namespace ternion
