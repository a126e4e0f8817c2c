#include "layers/gpt_model.h"

#include <set>

#include "kernels/elementwise.h"
#include "layers/model_facts.h"

namespace ternion {

GptModel::GptModel(const ModelConfig& config, const TensorParallel& tp, ModelChunk chunk)
    : config_(config), tp_(tp), chunk_(chunk) {
  if (chunk_.end_block < 0) chunk_.end_block = config.n_layer;
  TN_CHECK(0 <= chunk_.first_block && chunk_.first_block <= chunk_.end_block &&
               chunk_.end_block <= config.n_layer,
           "blocks [", chunk_.first_block, ", ", chunk_.end_block, ") of ", config.n_layer);
  const ModelFamily& family = model_family(config.family);
  const bool tied = family.ties_embeddings(config);
  if (chunk_.has_embedding) {
    embedding_ = family.embedding(config, tp);
    if (tied) tied_embedding_ = &embedding_->token_weight();
    embedding_->collect_parameters(embedding_params_);
  }
  for (std::int64_t i = chunk_.first_block; i < chunk_.end_block; ++i) {
    BlockSpec spec{"h." + std::to_string(i), i, config_, tp_};
    blocks_.push_back(LayerRegistry::instance().create(config.block, spec));
    block_params_.push_back(blocks_.back()->parameters());
    // Names key the optimizer state and the checkpoints: a block's parameters are named under
    // its own prefix, so that no two blocks (on this stage or another) share one.
    for (const Parameter* p : block_params_.back())
      TN_CHECK_AS(ConfigError, p->name.rfind(spec.name + ".", 0) == 0, "block type '",
                  config.block, "' names parameter '", p->name, "' of block ", spec.name,
                  ": name each block's parameters under its BlockSpec::name ('", spec.name,
                  ".*')");
  }
  if (chunk_.has_head) {
    if (!tied || !chunk_.has_embedding) {
      // Tied: exactly the first chunk's wte (same name, shape and shard, so the same initial
      // values).
      head_weight_ = make_sharded_parameter(tied ? "wte" : "lm_head.weight",
                                            {config.padded_vocab_size(), config.d_model}, 0,
                                            tp.size(), tp.rank(), ParameterInit::Normal,
                                            static_cast<float>(config.init_std), true);
      if (tied) tied_embedding_ = &head_weight_;
      head_params_.push_back(&head_weight_);
    }
    Parameter& weight = tied && chunk_.has_embedding ? embedding_->token_weight() : head_weight_;
    head_ = std::make_unique<LanguageModelHead>("head", config, family.final_norm(config, tp),
                                                weight, tp);
    head_->collect_parameters(head_params_);
    head_writes_ = head_params_;
    if (tied && chunk_.has_embedding) head_writes_.push_back(&embedding_->token_weight());
  }
  // In forward order, which names the parameters as the one-rank model does.
  parameters_ = embedding_params_;
  for (const auto& params : block_params_)
    parameters_.insert(parameters_.end(), params.begin(), params.end());
  parameters_.insert(parameters_.end(), head_params_.begin(), head_params_.end());
  // Two parameters of one name would save and then fail to load; only a block can repeat one.
  std::set<std::string> names;
  for (const Parameter* p : parameters_)
    TN_CHECK_AS(ConfigError, names.insert(p->name).second, "block type '", config.block,
                "' names parameter '", p->name, "' twice");
}

Tensor GptModel::run_blocks(Tensor x, ActivationContext& ctx) const {
  for (auto& block : blocks_) x = block->forward(x, ctx);
  return x;
}

bool GptModel::recomputes_block(std::size_t i) const {
  return recompute_.mode == Recompute::full &&
         (recompute_.full_blocks == 0 || static_cast<std::int64_t>(i) < recompute_.full_blocks);
}

Tensor GptModel::block_forward(std::size_t i, const Tensor& x, ActivationContext& ctx) {
  if (!recomputes_block(i)) return blocks_[i]->forward(x, ctx);
  // Keyed by the block's parameter list: the block itself may save under its own address.
  ctx.save<BlockInput>(&block_params_[i]).input = x;
  ActivationContext discarded(ctx.info());
  return blocks_[i]->forward(x, discarded);
}

Tensor GptModel::block_backward(std::size_t i, const Tensor& grad_output, ActivationContext& ctx) {
  if (!recomputes_block(i)) return blocks_[i]->backward(grad_output, ctx);
  const BlockInput kept = ctx.take<BlockInput>(&block_params_[i]);
  ActivationContext again(ctx.info());  // the same keys: the same dropout masks
  again.set_defer_weight_gradients(ctx.defers_weight_gradients());
  blocks_[i]->forward(kept.input, again);
  Tensor dx = blocks_[i]->backward(grad_output, again);
  for (auto& work : again.take_weight_gradients()) ctx.weight_gradients(std::move(work));
  return dx;
}

Tensor GptModel::forward_chunk(const Tensor& input, const Tensor& targets, ActivationContext& ctx,
                               Tensor* losses) {
  ctx.set_selective_recompute(recompute_.mode == Recompute::selective);
  Tensor x = embedding_ ? embedding_->forward(input, ctx) : input;
  for (std::size_t i = 0; i < blocks_.size(); ++i) x = block_forward(i, x, ctx);
  if (!head_) return x;
  TN_CHECK(losses != nullptr, "the last chunk's forward returns a loss");
  *losses = head_->forward(x, targets, ctx);
  return Tensor();
}

Tensor GptModel::backward_chunk(const Tensor& grad_output, float loss_weight,
                                ActivationContext& ctx) {
  return backward_layers(grad_output, loss_weight, ctx, /*split=*/false);
}

Tensor GptModel::backward_input_chunk(const Tensor& grad_output, float loss_weight,
                                      ActivationContext& ctx) {
  return backward_layers(grad_output, loss_weight, ctx, /*split=*/true);
}

void GptModel::backward_weight_chunk(ActivationContext& ctx) {
  DeferredWeightGradients deferred = ctx.take<DeferredWeightGradients>(this);
  for (DeferredWeightGradients::Layer& layer : deferred.layers) {
    needed(*layer.writes);
    for (auto& work : layer.work) work();
    ready(ctx, *layer.params);
  }
}

// Layer by layer in reverse: each layer's parameter gradients are needed before and ready
// after its backward, or when split, before and after its deferred work (backward_weight_chunk).
Tensor GptModel::backward_layers(const Tensor& grad_output, float loss_weight,
                                 ActivationContext& ctx, bool split) {
  ctx.set_defer_weight_gradients(split);
  DeferredWeightGradients* deferred = split ? &ctx.save<DeferredWeightGradients>(this) : nullptr;
  auto layer = [&](const std::vector<Parameter*>& writes, const std::vector<Parameter*>& params,
                   auto&& backward) {
    if (deferred != nullptr) {
      backward();
      deferred->layers.push_back({&writes, &params, ctx.take_weight_gradients()});
      return;
    }
    needed(writes);
    backward();
    ready(ctx, params);
  };
  Tensor dx = grad_output;
  if (head_) layer(head_writes_, head_params_, [&] { dx = head_->backward(loss_weight, ctx); });
  for (std::size_t i = blocks_.size(); i-- > 0;)
    layer(block_params_[i], block_params_[i], [&] { dx = block_backward(i, dx, ctx); });
  if (!embedding_) return dx;
  layer(embedding_params_, embedding_params_, [&] { embedding_->backward(dx, ctx); });
  return Tensor();
}

Tensor GptModel::forward_chunk_logits(const Tensor& input, ActivationContext& ctx) const {
  Tensor x = run_blocks(embedding_ ? embedding_->forward(input, ctx) : input, ctx);
  return head_ ? head_->logits(x, ctx) : x;
}

double GptModel::forward(const Tensor& tokens, const Tensor& targets, ActivationContext& ctx) {
  return summed_loss(forward_losses(tokens, targets, ctx));
}

Tensor GptModel::forward_losses(const Tensor& tokens, const Tensor& targets,
                                ActivationContext& ctx) {
  TN_CHECK(embedding_ && head_, "forward of the whole model on a pipeline chunk");
  Tensor losses;
  forward_chunk(tokens, targets, ctx, &losses);
  return losses;
}

void GptModel::backward(float loss_weight, ActivationContext& ctx) {
  backward_chunk(Tensor(), loss_weight, ctx);
}

Tensor GptModel::logits(const Tensor& tokens, ActivationContext& ctx) const {
  TN_CHECK(embedding_ && head_, "logits of the whole model on a pipeline chunk");
  return forward_chunk_logits(tokens, ctx);
}

double GptModel::forward_flops_per_token() {
  double flops = embedding_ ? embedding_->forward_flops_per_token(config_.seq_len) : 0.0;
  for (auto& block : blocks_) flops += block->forward_flops_per_token(config_.seq_len);
  return head_ ? flops + head_->forward_flops_per_token(config_.seq_len) : flops;
}

void GptModel::initialize(std::uint64_t seed) {
  for (Parameter* p : parameters_) initialize_parameter(*p, seed);
}

void GptModel::zero_grad() {
  std::vector<Tensor> grads;
  for (Parameter* p : parameters_) grads.push_back(p->grad);
  zero_many(grads);
}

std::vector<std::unique_ptr<GptModel>> build_pipeline_chunks(const ModelConfig& config,
                                                             const TensorParallel& tp,
                                                             int stages, int stage,
                                                             int virtual_stages) {
  const int total = stages * virtual_stages;
  std::vector<std::unique_ptr<GptModel>> chunks;
  for (int c = 0; c < virtual_stages; ++c) {
    const int v = c * stages + stage;
    const StageBlocks blocks = pipeline_stage_blocks(config.n_layer, total, v);
    chunks.push_back(std::make_unique<GptModel>(
        config, tp, ModelChunk{blocks.begin, blocks.end, v == 0, v == total - 1}));
  }
  return chunks;
}

}  // namespace ternion
