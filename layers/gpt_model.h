// A GPT-style decoder of any family (layers/model_family.h, `model.family`): the family's
// embedding, n_layer blocks of the registered type, the family's final norm and the LM head.
// Built over a tensor-parallel group, every layer holds its shard and the model computes what
// the unsharded model computes (tests/tensor_parallel_mpi/).
//
//   tokens [B, T] -> Embedding -> h.0 ... h.{L-1} -> LanguageModelHead -> summed loss
//
// A GptModel can also be one chunk of a pipeline: blocks [first_block, end_block), with the
// embedding when it is the first chunk and the head when it is the last. Where the family ties
// the head to the token embedding, a last chunk without the embedding holds its own copy of
// it, named "wte" like the first chunk's and initialised identically; the trainer sums the two
// copies' gradients over the pipeline's embedding group, so they stay equal. An untied head
// has its own weight, "lm_head.weight".
//
// forward_backward is not offered on purpose: a training step runs forward and backward of
// several micro-batches, each with its own ActivationContext, and pipeline schedules
// interleave them; so forward and backward are separate calls.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "layers/embedding.h"
#include "layers/layer_registry.h"
#include "layers/lm_head.h"
#include "layers/model_family.h"
#include "layers/recompute.h"

namespace ternion {

// Called during backward as a layer's parameter gradients are complete for the micro-batch
// (the data-parallel reducer starts a bucket's reduction once all of it is).
using GradientReadyHook =
    std::function<void(const MicroBatchInfo&, const std::vector<Parameter*>&)>;
// Called during backward before a layer writes its parameters' gradients (ZeRO-2's reducer
// gives the gradients memory only while a bucket is being filled).
using GradientsNeededHook = std::function<void(const std::vector<Parameter*>&)>;

struct ModelChunk {
  std::int64_t first_block = 0;
  std::int64_t end_block = -1;  // -1: n_layer
  bool has_embedding = true;
  bool has_head = true;
};

class GptModel {
 public:
  // `tp` is the tensor-parallel group to shard over (none: the whole model on this rank).
  explicit GptModel(const ModelConfig& config, const TensorParallel& tp = {},
                    ModelChunk chunk = {});

  // The whole model (a chunk with the embedding and the head): summed cross-entropy over the
  // micro-batch's valid targets, and its backward, which accumulates every parameter's
  // gradient with `loss_weight` the weight of each token's loss. forward_losses gives the
  // per-token losses instead, still on the device (summed_loss in layers/lm_head.h reads them):
  // a training step reads them once, after queueing every micro-batch's backward.
  double forward(const Tensor& tokens, const Tensor& targets, ActivationContext& ctx);
  Tensor forward_losses(const Tensor& tokens, const Tensor& targets, ActivationContext& ctx);
  void backward(float loss_weight, ActivationContext& ctx);
  // Logits [B, T, padded_vocab] of the whole model (no loss).
  Tensor logits(const Tensor& tokens, ActivationContext& ctx) const;

  // One chunk. forward: `input` is tokens [B, T] (with the embedding) or the previous chunk's
  // hidden states; returns this chunk's hidden states, or with the head an undefined tensor
  // and the per-token losses in *losses (on the device: layers/lm_head.h). backward:
  // `grad_output` is the gradient of the returned hidden states (unused with the head, which
  // starts from `loss_weight`); returns the gradient of `input` (undefined with the
  // embedding).
  Tensor forward_chunk(const Tensor& input, const Tensor& targets, ActivationContext& ctx,
                       Tensor* losses);
  Tensor backward_chunk(const Tensor& grad_output, float loss_weight, ActivationContext& ctx);
  // backward_chunk split in two (the zero-bubble schedule): the input gradient, each layer's
  // parameter gradients kept in `ctx`, then later those, with the hooks around each layer's
  // share (so the data-parallel reducer sees them ready after them). Together they give
  // backward_chunk's gradients, bit for bit.
  Tensor backward_input_chunk(const Tensor& grad_output, float loss_weight,
                              ActivationContext& ctx);
  void backward_weight_chunk(ActivationContext& ctx);
  // Hidden states, or with the head the logits [B, T, padded_vocab] (generation).
  Tensor forward_chunk_logits(const Tensor& input, ActivationContext& ctx) const;

  // Every parameter once (the tied embedding is listed once per chunk that holds it); under
  // tensor parallelism this rank's shards and its copies of the replicated parameters.
  const std::vector<Parameter*>& parameters() const { return parameters_; }
  // The token embedding that the head shares (the family ties them), on a chunk holding the
  // embedding or the head; null otherwise (an untied head, or a chunk of blocks alone).
  Parameter* tied_embedding() const { return tied_embedding_; }
  // Forward FLOPs per token of this chunk on this rank, at full context (model.seq_len).
  double forward_flops_per_token();
  void initialize(std::uint64_t seed);
  void zero_grad();
  void set_gradient_ready_hook(GradientReadyHook hook) { hook_ = std::move(hook); }
  void set_gradients_needed_hook(GradientsNeededHook hook) { needed_hook_ = std::move(hook); }
  void set_recompute(RecomputePolicy policy) { recompute_ = policy; }
  const ModelConfig& config() const { return config_; }
  const ModelChunk& chunk() const { return chunk_; }

 private:
  struct BlockInput : SavedActivations {
    Tensor input;
  };
  // A split backward's parameter-gradient work, layer by layer in backward order.
  struct DeferredWeightGradients : SavedActivations {
    struct Layer {
      const std::vector<Parameter*>* writes;  // for the gradients-needed hook
      const std::vector<Parameter*>* params;  // for the gradient-ready hook
      std::vector<std::function<void()>> work;
    };
    std::vector<Layer> layers;
  };
  Tensor backward_layers(const Tensor& grad_output, float loss_weight, ActivationContext& ctx,
                         bool split);
  Tensor run_blocks(Tensor x, ActivationContext& ctx) const;
  // Block i's forward (recomputed ones keep only their input) and backward.
  Tensor block_forward(std::size_t i, const Tensor& x, ActivationContext& ctx);
  Tensor block_backward(std::size_t i, const Tensor& grad_output, ActivationContext& ctx);
  bool recomputes_block(std::size_t i) const;
  void ready(const ActivationContext& ctx, const std::vector<Parameter*>& params) const {
    if (hook_) hook_(ctx.info(), params);
  }
  void needed(const std::vector<Parameter*>& params) const {
    if (needed_hook_) needed_hook_(params);
  }
  ModelConfig config_;
  TensorParallel tp_;
  ModelChunk chunk_;
  std::unique_ptr<Embedding> embedding_;
  Parameter head_weight_;  // untied: lm_head.weight; tied without the embedding: wte's copy
  std::vector<std::unique_ptr<Layer>> blocks_;
  std::unique_ptr<LanguageModelHead> head_;
  Parameter* tied_embedding_ = nullptr;
  std::vector<Parameter*> parameters_;
  // Each layer's parameters, for the hook: embedding, blocks in order, head.
  std::vector<Parameter*> embedding_params_, head_params_;
  std::vector<Parameter*> head_writes_;  // head_params_, and the embedding's wte it is tied to
  std::vector<std::vector<Parameter*>> block_params_;
  GradientReadyHook hook_;
  GradientsNeededHook needed_hook_;
  RecomputePolicy recompute_;
};

// This rank's chunks of a pipeline of `stages` ranks with `virtual_stages` chunks each (one
// stage: the whole model): chunk c of pipeline rank s is virtual stage c * stages + s, with
// the blocks layers/model_facts.h's pipeline_stage_blocks gives it.
std::vector<std::unique_ptr<GptModel>> build_pipeline_chunks(const ModelConfig& config,
                                                             const TensorParallel& tp,
                                                             int stages, int stage,
                                                             int virtual_stages);

}  // namespace ternion
