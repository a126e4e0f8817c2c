#include "layers/grouped_query_attention.h"

#include <cmath>

#include "kernels/attention.h"
#include "layers/attention.h"
#include "kernels/rotary_qkv.h"
#include "layers/kv_cache.h"
#include "layers/residual_branch.h"

namespace ternion {

RotaryParameters rotary_parameters(const ModelConfig& config) {
  RotaryParameters rope(config.rope_theta);
  rope.scaling_factor = config.rope_scaling_factor;
  rope.low_freq_factor = config.rope_scaling_low_freq_factor;
  rope.high_freq_factor = config.rope_scaling_high_freq_factor;
  rope.original_context = static_cast<double>(config.rope_scaling_original_context);
  return rope;
}

GroupedQueryAttention::GroupedQueryAttention(std::string name, const ModelConfig& config,
                                             const TensorParallel& tp)
    : ResidualBranch(std::move(name)),
      local_kv_heads_(config.kv_heads() / tp.size()),
      queries_per_kv_(config.n_head / config.kv_heads()),
      rope_(rotary_parameters(config)),
      qkv_(this->name() + ".qkv", config.d_model,
           (config.n_head + 2 * config.kv_heads()) * config.head_size(), false,
           static_cast<float>(config.init_std), tp),
      proj_(this->name() + ".proj", config.d_model, config.d_model, false,
            static_cast<float>(config.init_std / std::sqrt(2.0 * config.n_layer)), tp),
      dropout_(this->name() + ".dropout", static_cast<float>(config.dropout), tp) {
  TN_CHECK(config.n_head % config.kv_heads() == 0 && config.kv_heads() % tp.size() == 0,
           "n_head ", config.n_head, " and n_kv_head ", config.kv_heads(), " over ", tp.size(),
           " tensor-parallel ranks");
}

Tensor GroupedQueryAttention::forward(const Tensor& input, ActivationContext& ctx) {
  return forward_impl(input, nullptr, ctx);
}

Tensor GroupedQueryAttention::forward_residual(const Tensor& input, const Tensor& residual,
                                               ActivationContext& ctx) {
  return forward_impl(input, &residual, ctx);
}

Tensor GroupedQueryAttention::forward_impl(const Tensor& input, const Tensor* residual,
                                           ActivationContext& ctx) {
  // The whole sequence, even under sequence parallelism: positions are 0 .. T-1.
  const Tensor grouped = qkv_.forward(input, ctx);
  const std::int64_t batch = grouped.size(0), seq = grouped.size(1);
  const std::int64_t local_heads = local_kv_heads_ * queries_per_kv_;
  const std::int64_t channels = grouped.size(2) / (queries_per_kv_ + 2) * queries_per_kv_;
  KvCache* cache = ctx.info().kv_cache;
  const std::int64_t first_position = cache != nullptr ? cache->positions() : 0;
  Tensor packed = Tensor::empty({batch, seq, 3 * channels}, grouped.dtype(), input.device());
  rotary_qkv_forward(packed, grouped, local_kv_heads_, queries_per_kv_, first_position,
                     rope_);
  if (cache != nullptr)
    return project_onto_residual(proj_, dropout_,
                                 cache->attend(this, packed, local_heads, queries_per_kv_),
                                 residual, ctx);
  Tensor attended = Tensor::empty({batch, seq, channels}, grouped.dtype(), input.device());
  Tensor lse = Tensor::empty({batch, local_heads, seq}, DType::F32, input.device());
  attention_forward(attended, lse, packed, local_heads);
  Saved& saved = ctx.save<Saved>(this);
  saved.packed = packed;
  saved.attended = attended;  // shared with the output projection's saved input: no copy
  saved.lse = lse;
  return project_onto_residual(proj_, dropout_, attended, residual, ctx);
}

Tensor GroupedQueryAttention::backward(const Tensor& grad_output, ActivationContext& ctx) {
  Tensor dattended = proj_.backward(dropout_.backward(grad_output, ctx), ctx);
  const Saved saved = ctx.take<Saved>(this);
  const std::int64_t local_heads = local_kv_heads_ * queries_per_kv_;
  Tensor dpacked = Tensor::empty(saved.packed.shape(), dattended.dtype(), grad_output.device());
  attention_backward(dpacked, dattended, saved.packed, saved.attended, saved.lse, local_heads);
  const std::int64_t width = saved.attended.size(2) / queries_per_kv_ * (queries_per_kv_ + 2);
  Tensor dgrouped = Tensor::empty({dpacked.size(0), dpacked.size(1), width}, dpacked.dtype(),
                                  grad_output.device());
  rotary_qkv_backward(dgrouped, dpacked, local_kv_heads_, queries_per_kv_, 0, rope_);
  return qkv_.backward(dgrouped, ctx);
}

void GroupedQueryAttention::collect_parameters(std::vector<Parameter*>& out) {
  qkv_.collect_parameters(out);
  proj_.collect_parameters(out);
}

// Every query head attends (the shared key/value heads save memory, not these FLOPs).
double GroupedQueryAttention::forward_flops_per_token(std::int64_t seq_len) {
  return Layer::forward_flops_per_token(seq_len) +
         causal_attention_flops_per_token(proj_.in_features(), seq_len);
}

}  // namespace ternion
