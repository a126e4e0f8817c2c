#include "layers/embedding.h"

#include "kernels/embedding.h"

namespace ternion {

Embedding::Embedding(std::string name, const ModelConfig& config)
    : Layer(std::move(name)),
      d_model_(config.d_model),
      wte_(make_parameter("wte", {config.padded_vocab_size(), config.d_model},
                          ParameterInit::Normal, static_cast<float>(config.init_std), true)),
      wpe_(make_parameter("wpe", {config.seq_len, config.d_model}, ParameterInit::Normal,
                          static_cast<float>(config.init_std), true)),
      dropout_(this->name() + ".dropout", static_cast<float>(config.dropout)) {}

Tensor Embedding::forward(const Tensor& tokens, ActivationContext& ctx) {
  TN_CHECK(tokens.dim() == 2 && tokens.size(1) <= wpe_.value.size(0), name(), ": tokens ",
           tokens.str(), " longer than the ", wpe_.value.size(0), " learned positions");
  Tensor out = Tensor::empty({tokens.size(0), tokens.size(1), d_model_}, DType::F32,
                             tokens.device());
  token_embedding_forward(out, tokens, wte_.value);
  position_embedding_forward(out, wpe_.value.slice(0, 0, tokens.size(1)));
  ctx.save<Saved>(this).tokens = tokens;
  return dropout_.forward(out, ctx);
}

Tensor Embedding::backward(const Tensor& grad_output, ActivationContext& ctx) {
  Tensor dout = dropout_.backward(grad_output, ctx);
  const Saved saved = ctx.take<Saved>(this);
  token_embedding_backward(wte_.grad, dout, saved.tokens);
  Tensor dwpe = wpe_.grad.slice(0, 0, saved.tokens.size(1));
  position_embedding_backward(dwpe, dout);
  return Tensor();
}

void Embedding::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&wte_);
  out.push_back(&wpe_);
}

}  // namespace ternion
