#include "layers/lm_head.h"

#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"

namespace ternion {

LanguageModelHead::LanguageModelHead(std::string name, const ModelConfig& config,
                                     std::unique_ptr<Norm> norm, Parameter& weight,
                                     const TensorParallel& tp)
    : name_(std::move(name)), vocab_size_(config.vocab_size), tp_(tp), norm_(std::move(norm)),
      weight_(weight) {}

Tensor LanguageModelHead::normed_rows(const Tensor& hidden, ActivationContext& ctx) {
  Tensor normed = norm_->forward(hidden, ctx);
  normed = tp_.sequence_parallel ? gather_from_sequence_region(normed, tp_)
                                 : copy_to_tensor_region(normed, tp_);
  return normed.view({-1, normed.size(-1)});
}

double summed_loss(const Tensor& losses) {
  double total = 0.0;
  for (float loss : losses.to_vector()) total += loss;
  return total;
}

Tensor LanguageModelHead::forward(const Tensor& hidden, const Tensor& targets,
                                  ActivationContext& ctx) {
  Tensor normed = normed_rows(hidden, ctx);
  const std::int64_t rows = normed.size(0);
  const Device device = hidden.device();
  Tensor logits = Tensor::empty({rows, weight_.compute_value().size(0)}, normed.dtype(), device);
  matmul(logits, normed, weight_.compute_value(), false, true);

  const Tensor flat_targets = targets.view({rows});
  Tensor losses = Tensor::empty({rows}, DType::F32, device);
  Tensor lse = Tensor::empty({rows}, DType::F32, device);
  if (tp_.active()) {
    const std::int64_t vocab_start = weight_.shard_offset;
    Tensor row_max = Tensor::empty({rows}, DType::F32, device);
    cross_entropy_row_max(row_max, logits, vocab_start, vocab_size_);
    all_reduce_in_place(row_max, tp_, ReduceOp::Max);
    Tensor sum_exp = Tensor::empty({rows}, DType::F32, device);
    cross_entropy_row_sum_exp(sum_exp, logits, row_max, vocab_start, vocab_size_);
    Tensor target_logit = Tensor::empty({rows}, DType::F32, device);
    cross_entropy_target_logit(target_logit, logits, flat_targets, vocab_start, vocab_size_);
    all_reduce_in_place(sum_exp, tp_);
    all_reduce_in_place(target_logit, tp_);
    cross_entropy_finish(losses, lse, row_max, sum_exp, target_logit, flat_targets);
  } else if (ctx.info().loss_weight) {
    // The whole vocabulary and the backward's weight known: the loss and the logits' gradient
    // (over the logits, in place) in one pass, whose second read of each row comes from L2 on
    // a GPU.
    cross_entropy_forward_backward(losses, lse, logits, logits, flat_targets,
                                   *ctx.info().loss_weight, vocab_size_);
  } else {
    // The whole vocabulary here: the pieces' composition in one op, which reads each row of
    // the logits once on a GPU (twice in a row's turn, from cache, on the CPU) where the
    // pieces read them twice over.
    cross_entropy_forward(losses, lse, logits, flat_targets, vocab_size_);
  }

  Saved& saved = ctx.save<Saved>(this);
  saved.normed = normed;
  saved.logits = logits;
  saved.lse = lse;
  saved.targets = flat_targets;
  saved.sequence_shape = {targets.size(0), targets.size(1), normed.size(1)};
  if (!tp_.active() && ctx.info().loss_weight) saved.gradient_weight = ctx.info().loss_weight;
  return losses;
}

Tensor LanguageModelHead::backward(float loss_weight, ActivationContext& ctx) {
  const std::optional<float> forward_weight = ctx.peek<Saved>(this).gradient_weight;
  TN_CHECK(!forward_weight || *forward_weight == loss_weight, name_,
           ": backward with loss weight ", loss_weight, " after a forward that used ",
           forward_weight.value_or(0.0f));
  Saved saved = ctx.take<Saved>(this);
  Tensor& dlogits = saved.logits;  // overwritten in place, unless the forward already did
  if (!saved.gradient_weight) {
    cross_entropy_backward(dlogits, saved.logits, saved.lse, saved.targets, loss_weight,
                           vocab_size_, kIgnoreIndex, weight_.shard_offset);
  }
  ctx.weight_gradients([this, dlogits, normed = saved.normed] {
    matmul(weight_.grad, dlogits, normed, true, false, 1.0f, 1.0f);
  });
  Tensor dnormed = Tensor::empty(saved.normed.shape(), dlogits.dtype(), dlogits.device());
  matmul(dnormed, dlogits, weight_.compute_value(), false, false);
  Tensor dhidden = dnormed.view(saved.sequence_shape);
  if (tp_.sequence_parallel) {
    dhidden = gather_from_sequence_region_backward(dhidden, tp_);
  } else {
    copy_to_tensor_region_backward(dhidden, tp_);
  }
  return norm_->backward(dhidden, ctx);
}

Tensor LanguageModelHead::logits(const Tensor& hidden, ActivationContext& ctx) {
  Tensor normed = normed_rows(hidden, ctx);
  Tensor logits = Tensor::empty({normed.size(0), weight_.compute_value().size(0)}, normed.dtype(),
                                hidden.device());
  matmul(logits, normed, weight_.compute_value(), false, true);
  logits = gather_from_tensor_region(logits, tp_);
  return logits.view({hidden.size(0), -1, logits.size(1)});
}

void LanguageModelHead::collect_parameters(std::vector<Parameter*>& out) {
  norm_->collect_parameters(out);
}

double LanguageModelHead::forward_flops_per_token(std::int64_t seq_len) {
  return norm_->forward_flops_per_token(seq_len) +
         2.0 * static_cast<double>(weight_.value.numel());
}

}  // namespace ternion
