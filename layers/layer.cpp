#include "layers/layer.h"

#include <utility>

namespace ternion {

void ActivationContext::offer_recompute(const Tensor& output, std::function<Tensor()> recipe) {
  if (!selective_) return;
  offer_ = Offer{output.weak_storage(), output.storage_offset(), output.numel(), std::move(recipe)};
}

SavedInput ActivationContext::keep(const Tensor& input) {
  std::optional<Offer> offer = std::move(offer_);
  offer_.reset();
  // The offer is for this tensor only while its storage lives (an address can be reused).
  if (!offer || offer->storage.lock() != input.weak_storage().lock() ||
      offer->offset != input.storage_offset() || offer->numel != input.numel() ||
      !input.is_contiguous())
    return SavedInput(input);
  return SavedInput(std::move(offer->recipe), input.shape());
}

void ActivationContext::weight_gradients(std::function<void()> work) {
  if (defer_) {
    weight_gradients_.push_back(std::move(work));
  } else {
    work();
  }
}

std::vector<std::function<void()>> ActivationContext::take_weight_gradients() {
  return std::exchange(weight_gradients_, {});
}

double Layer::forward_flops_per_token(std::int64_t) {
  double flops = 0.0;
  for (const Parameter* p : parameters())
    if (p->value.dim() >= 2) flops += 2.0 * static_cast<double>(p->value.numel());
  return flops;
}

}  // namespace ternion
