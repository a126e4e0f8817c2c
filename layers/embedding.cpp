#include "layers/embedding.h"

#include "kernels/embedding.h"
#include "layers/kv_cache.h"

namespace ternion {

Embedding::Embedding(std::string name, const ModelConfig& config, const TensorParallel& tp,
                     bool learned_positions)
    : Layer(std::move(name)),
      d_model_(config.d_model),
      tp_(tp),
      wte_(make_sharded_parameter("wte", {config.padded_vocab_size(), config.d_model}, 0,
                                  tp.size(), tp.rank(), ParameterInit::Normal,
                                  static_cast<float>(config.init_std), true)),
      wpe_(learned_positions ? make_parameter("wpe", {config.seq_len, config.d_model},
                                              ParameterInit::Normal,
                                              static_cast<float>(config.init_std), true)
                             : Parameter()),
      dropout_(this->name() + ".dropout", static_cast<float>(config.dropout), tp) {
  // Under sequence parallelism each rank adds (and so differentiates) its own positions only.
  wpe_.tensor_parallel_partial_grad = tp.sequence_parallel && tp.active();
}

Tensor Embedding::forward(const Tensor& tokens, ActivationContext& ctx) {
  TN_CHECK(tokens.dim() == 2, name(), ": tokens ", tokens.str(), " are not [batch, seq]");
  const std::int64_t cached = ctx.info().kv_cache ? ctx.info().kv_cache->positions() : 0;
  if (wpe_.value.defined())
    TN_CHECK(cached + tokens.size(1) <= wpe_.compute_value().size(0), name(), ": tokens ",
             tokens.str(), " after ", cached, " cached positions pass the ",
             wpe_.compute_value().size(0), " learned positions");
  Tensor looked_up = Tensor::empty({tokens.size(0), tokens.size(1), d_model_},
                                   wte_.compute_value().dtype(), tokens.device());
  token_embedding_forward(looked_up, tokens, wte_.compute_value(), wte_.shard_offset);
  Tensor out;
  // Decoding with a KV cache continues after the cached positions.
  std::int64_t first_position = ctx.info().kv_cache ? ctx.info().kv_cache->positions() : 0;
  if (tp_.sequence_parallel) {
    out = reduce_scatter_to_sequence_region(looked_up, tp_);
    first_position = tp_.rank() * out.size(1);
  } else {
    reduce_from_tensor_region(looked_up, tp_);
    out = looked_up;
  }
  if (wpe_.value.defined())
    position_embedding_forward(out, wpe_.compute_value().slice(0, first_position, out.size(1)));
  Saved& saved = ctx.save<Saved>(this);
  saved.tokens = tokens;
  saved.first_position = first_position;
  return dropout_.forward(out, ctx);
}

Tensor Embedding::backward(const Tensor& grad_output, ActivationContext& ctx) {
  // All of it is parameter gradients but the sequence-parallel gather, which stays in B.
  Tensor dout = dropout_.backward(grad_output, ctx);
  const Saved saved = ctx.take<Saved>(this);
  const Tensor dlooked_up = tp_.sequence_parallel
                                ? reduce_scatter_to_sequence_region_backward(dout, tp_)
                                : reduce_from_tensor_region_backward(dout, tp_);
  ctx.weight_gradients([this, dout, dlooked_up, saved] {
    if (wpe_.value.defined()) {
      Tensor dwpe = wpe_.grad.slice(0, saved.first_position, dout.size(1));
      position_embedding_backward(dwpe, dout);
    }
    token_embedding_backward(wte_.grad, dlooked_up, saved.tokens, wte_.shard_offset);
  });
  return Tensor();
}

void Embedding::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&wte_);
  if (wpe_.value.defined()) out.push_back(&wpe_);
}

}  // namespace ternion
