#include "layers/lm_head.h"

#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"

namespace ternion {

LanguageModelHead::LanguageModelHead(std::string name, const ModelConfig& config,
                                     Parameter& tied_weight)
    : name_(std::move(name)), vocab_size_(config.vocab_size), ln_f_("ln_f", config.d_model),
      wte_(tied_weight) {}

double LanguageModelHead::forward(const Tensor& hidden, const Tensor& targets,
                                  ActivationContext& ctx) {
  const std::int64_t rows = hidden.size(0) * hidden.size(1);
  Tensor normed = ln_f_.forward(hidden, ctx).view({rows, hidden.size(2)});
  Tensor logits = Tensor::empty({rows, wte_.value.size(0)}, DType::F32, hidden.device());
  matmul(logits, normed, wte_.value, false, true);
  Tensor losses = Tensor::empty({rows}, DType::F32, hidden.device());
  Tensor lse = Tensor::empty({rows}, DType::F32, hidden.device());
  const Tensor flat_targets = targets.view({rows});
  cross_entropy_forward(losses, lse, logits, flat_targets, vocab_size_);
  Saved& saved = ctx.save<Saved>(this);
  saved.normed = normed;
  saved.logits = logits;
  saved.lse = lse;
  saved.targets = flat_targets;
  saved.hidden_shape = hidden.shape();
  double total = 0.0;
  for (float loss : losses.to_vector()) total += loss;
  return total;
}

Tensor LanguageModelHead::backward(float loss_weight, ActivationContext& ctx) {
  Saved saved = ctx.take<Saved>(this);
  Tensor& dlogits = saved.logits;  // overwritten in place
  cross_entropy_backward(dlogits, saved.logits, saved.lse, saved.targets, loss_weight,
                         vocab_size_);
  matmul(wte_.grad, dlogits, saved.normed, true, false, 1.0f, 1.0f);
  Tensor dnormed = Tensor::empty(saved.normed.shape(), DType::F32, dlogits.device());
  matmul(dnormed, dlogits, wte_.value, false, false);
  return ln_f_.backward(dnormed, ctx).view(saved.hidden_shape);
}

Tensor LanguageModelHead::logits(const Tensor& hidden, ActivationContext& ctx) {
  const std::int64_t rows = hidden.size(0) * hidden.size(1);
  Tensor normed = ln_f_.forward(hidden, ctx).view({rows, hidden.size(2)});
  Tensor logits = Tensor::empty({rows, wte_.value.size(0)}, DType::F32, hidden.device());
  matmul(logits, normed, wte_.value, false, true);
  return logits.view({hidden.size(0), hidden.size(1), wte_.value.size(0)});
}

void LanguageModelHead::collect_parameters(std::vector<Parameter*>& out) {
  ln_f_.collect_parameters(out);
}

}  // namespace ternion
