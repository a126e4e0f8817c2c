// Causal grouped-query self-attention with rotary positions (Llama's), no biases:
//   qkv = x Wqkv^T        [B, T, (H + 2G) hs / tp], grouped by key/value head (below)
//   q, k rotated by their positions (rotate-half RoPE), each key/value head shared by the
//   H / G query heads of its group, scaled-dot-product attention, output projection [C -> C],
//   dropout.                                                       [B, T, C] -> [B, T, C]
// H = model.n_head query heads, G = model.n_kv_head key/value heads, hs = C / H.
//
// The QKV projection's rows are grouped by key/value head g: the r = H / G query heads of the
// group, then key g, then value g. Tensor parallelism splits the G groups over the ranks
// (G / tp each), so a rank's share is one contiguous slice of the projection whatever the
// layout, and its query heads are exactly those of its keys and values. kernels/rotary_qkv.h
// rotates and repeats the keys and values into attention's per-head [q | k | v] layout; the
// output projection is row-parallel (one all-reduce forward, one backward in the QKV
// projection's input gradient), as in CausalSelfAttention.
#pragma once

#include "layers/block_parts.h"
#include "kernels/rotary_qkv_math.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/model_config.h"

namespace ternion {

// The model's rotary frequencies (model.rope_theta and model.rope_scaling_*).
RotaryParameters rotary_parameters(const ModelConfig& config);

class GroupedQueryAttention : public ResidualBranch {
 public:
  GroupedQueryAttention(std::string name, const ModelConfig& config,
                        const TensorParallel& tp = {});
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor forward_residual(const Tensor& input, const Tensor& residual,
                          ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  double forward_flops_per_token(std::int64_t seq_len) override;

 private:
  struct Saved : SavedActivations {
    Tensor packed, attended, lse;  // [B, T, 3 H hs / tp], [B, T, H hs / tp], [B, H / tp, T]
  };
  Tensor forward_impl(const Tensor& input, const Tensor* residual, ActivationContext& ctx);
  std::int64_t local_kv_heads_, queries_per_kv_;
  RotaryParameters rope_;
  ColumnParallelLinear qkv_;
  RowParallelLinear proj_;
  Dropout dropout_;
};

}  // namespace ternion
