// Causal multi-head self-attention: QKV projection [C -> 3C] (per head [q | k | v], see
// kernels/attention.h), scaled-dot-product attention, output projection [C -> C], dropout on
// the output. [batch, seq, C] -> [batch, seq, C].
//
// Tensor parallel (Megatron-LM): the heads are split over the group, n_head / tp per rank.
// The QKV projection is column-parallel — grouping its output by head makes a rank's heads one
// contiguous slice of it — attention runs on the local heads alone, and the output projection
// is row-parallel: one all-reduce forward (in the projection) and one backward (in the QKV
// projection's input gradient).
#pragma once

#include <memory>

#include "layers/block_parts.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/model_config.h"

namespace ternion {

// Forward FLOPs per token of causal attention over `channels` (heads x head size) with
// sequences of `seq_len`: QK^T and PV, over the seq_len / 2 keys a query visits on average.
inline double causal_attention_flops_per_token(std::int64_t channels, std::int64_t seq_len) {
  return 2.0 * 2.0 * static_cast<double>(channels) * static_cast<double>(seq_len) / 2.0;
}

class CausalSelfAttention : public ResidualBranch {
 public:
  CausalSelfAttention(std::string name, const ModelConfig& config, const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor forward_residual(const Tensor& input, const Tensor& residual,
                          ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  double forward_flops_per_token(std::int64_t seq_len) override;

 private:
  struct Saved : SavedActivations {
    Tensor qkv, attended, lse;  // [B, T, 3C / tp], [B, T, C / tp], [B, H / tp, T] (F32)
  };
  Tensor forward_impl(const Tensor& input, const Tensor* residual, ActivationContext& ctx);
  std::int64_t local_heads_;
  ColumnParallelLinear qkv_;
  RowParallelLinear proj_;
  Dropout dropout_;
};

}  // namespace ternion
