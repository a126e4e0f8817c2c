#include "layers/gpt_model.h"

namespace ternion {

GptModel::GptModel(const ModelConfig& config, const TensorParallel& tp)
    : config_(config),
      tp_(tp),
      embedding_("embedding", config, tp),
      head_("head", config, embedding_.token_weight(), tp) {
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    BlockSpec spec{"h." + std::to_string(i), i, config_, tp_};
    blocks_.push_back(LayerRegistry::instance().create(config.block, spec));
  }
  embedding_.collect_parameters(parameters_);
  for (auto& block : blocks_) block->collect_parameters(parameters_);
  head_.collect_parameters(parameters_);
}

double GptModel::forward(const Tensor& tokens, const Tensor& targets, ActivationContext& ctx) {
  Tensor x = embedding_.forward(tokens, ctx);
  for (auto& block : blocks_) x = block->forward(x, ctx);
  return head_.forward(x, targets, ctx);
}

void GptModel::backward(float loss_weight, ActivationContext& ctx) {
  Tensor dx = head_.backward(loss_weight, ctx);
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) dx = (*it)->backward(dx, ctx);
  embedding_.backward(dx, ctx);
}

Tensor GptModel::logits(const Tensor& tokens, ActivationContext& ctx) {
  Tensor x = embedding_.forward(tokens, ctx);
  for (auto& block : blocks_) x = block->forward(x, ctx);
  return head_.logits(x, ctx);
}

void GptModel::initialize(std::uint64_t seed) {
  for (Parameter* p : parameters_) initialize_parameter(*p, seed);
}

void GptModel::zero_grad() {
  for (Parameter* p : parameters_) p->grad.zero();
}

double forward_flops_per_token(const ModelConfig& c) {
  const double d = static_cast<double>(c.d_model), ff = static_cast<double>(c.ff_width());
  const double per_layer = 2.0 * (3 * d * d + d * d + 2 * d * ff)  // qkv, proj, fc, proj
                           + 2.0 * 2.0 * d * c.seq_len / 2.0;     // causal QK^T and PV
  return c.n_layer * per_layer + 2.0 * d * static_cast<double>(c.padded_vocab_size());
}

}  // namespace ternion
