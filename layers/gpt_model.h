// The GPT model: embedding, n_layer blocks of the registered type, LM head tied to the token
// embedding. Built over a tensor-parallel group, every layer holds its shard and the model
// computes what the unsharded model computes (tests/tensor_parallel_mpi/).
//
//   tokens [B, T] -> Embedding -> h.0 ... h.{L-1} -> LanguageModelHead -> summed loss
//
// forward_backward is not offered on purpose: a training step runs forward and backward of
// several micro-batches, each with its own ActivationContext, and pipeline schedules
// interleave them; so forward and backward are separate calls.
#pragma once

#include <memory>
#include <vector>

#include "layers/embedding.h"
#include "layers/layer_registry.h"
#include "layers/lm_head.h"

namespace ternion {

class GptModel {
 public:
  // `tp` is the tensor-parallel group to shard over (none: the whole model on this rank).
  explicit GptModel(const ModelConfig& config, const TensorParallel& tp = {});

  // Summed cross-entropy over the micro-batch's valid targets.
  double forward(const Tensor& tokens, const Tensor& targets, ActivationContext& ctx);
  // Accumulates every parameter's gradient; `loss_weight` weighs each token's loss.
  void backward(float loss_weight, ActivationContext& ctx);
  // Logits [B, T, padded_vocab] (no loss, nothing kept for backward beyond `ctx`).
  Tensor logits(const Tensor& tokens, ActivationContext& ctx);

  // Every parameter once (the tied embedding is listed once, by the embedding); under tensor
  // parallelism this rank's shards and its copies of the replicated parameters.
  const std::vector<Parameter*>& parameters() const { return parameters_; }
  void initialize(std::uint64_t seed);
  void zero_grad();
  const ModelConfig& config() const { return config_; }

 private:
  ModelConfig config_;
  TensorParallel tp_;
  Embedding embedding_;
  std::vector<std::unique_ptr<Layer>> blocks_;
  LanguageModelHead head_;
  std::vector<Parameter*> parameters_;
};

// Forward FLOPs per token of the model's matrix multiplies and attention (the figure
// training throughput is quoted against: a training step costs 3x this per token).
double forward_flops_per_token(const ModelConfig& config);

}  // namespace ternion
