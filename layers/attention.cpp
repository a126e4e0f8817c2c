#include "layers/attention.h"

#include <cmath>

#include "kernels/attention.h"
#include "layers/kv_cache.h"
#include "layers/residual_branch.h"

namespace ternion {

CausalSelfAttention::CausalSelfAttention(std::string name, const ModelConfig& config,
                                         const TensorParallel& tp)
    : ResidualBranch(std::move(name)),
      local_heads_(config.n_head / tp.size()),
      qkv_(this->name() + ".qkv", config.d_model, 3 * config.d_model, true,
           static_cast<float>(config.init_std), tp),
      proj_(this->name() + ".proj", config.d_model, config.d_model, true,
            static_cast<float>(config.init_std / std::sqrt(2.0 * config.n_layer)), tp),
      dropout_(this->name() + ".dropout", static_cast<float>(config.dropout), tp) {
  TN_CHECK(config.n_head % tp.size() == 0, "n_head ", config.n_head, " over ", tp.size(),
           " tensor-parallel ranks");
}

Tensor CausalSelfAttention::forward(const Tensor& input, ActivationContext& ctx) {
  return forward_impl(input, nullptr, ctx);
}

Tensor CausalSelfAttention::forward_residual(const Tensor& input, const Tensor& residual,
                                             ActivationContext& ctx) {
  return forward_impl(input, &residual, ctx);
}

Tensor CausalSelfAttention::forward_impl(const Tensor& input, const Tensor* residual,
                                         ActivationContext& ctx) {
  Tensor qkv = qkv_.forward(input, ctx);  // the whole sequence, even under sequence parallelism
  if (KvCache* cache = ctx.info().kv_cache)
    return project_onto_residual(proj_, dropout_, cache->attend(this, qkv, local_heads_, 1),
                                 residual, ctx);
  const std::int64_t batch = qkv.size(0), seq = qkv.size(1), channels = qkv.size(2) / 3;
  Tensor attended = Tensor::empty({batch, seq, channels}, qkv.dtype(), input.device());
  Tensor lse = Tensor::empty({batch, local_heads_, seq}, DType::F32, input.device());
  attention_forward(attended, lse, qkv, local_heads_);
  Saved& saved = ctx.save<Saved>(this);
  saved.qkv = qkv;
  saved.attended = attended;  // shared with the output projection's saved input: no copy
  saved.lse = lse;
  return project_onto_residual(proj_, dropout_, attended, residual, ctx);
}

Tensor CausalSelfAttention::backward(const Tensor& grad_output, ActivationContext& ctx) {
  Tensor dattended = proj_.backward(dropout_.backward(grad_output, ctx), ctx);
  const Saved saved = ctx.take<Saved>(this);
  Tensor dqkv = Tensor::empty(saved.qkv.shape(), dattended.dtype(), grad_output.device());
  attention_backward(dqkv, dattended, saved.qkv, saved.attended, saved.lse, local_heads_);
  return qkv_.backward(dqkv, ctx);
}

void CausalSelfAttention::collect_parameters(std::vector<Parameter*>& out) {
  qkv_.collect_parameters(out);
  proj_.collect_parameters(out);
}

double CausalSelfAttention::forward_flops_per_token(std::int64_t seq_len) {
  return Layer::forward_flops_per_token(seq_len) +
         causal_attention_flops_per_token(proj_.in_features(), seq_len);
}

}  // namespace ternion
