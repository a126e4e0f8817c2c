#include "layers/layer.h"

namespace ternion {

double Layer::forward_flops_per_token(std::int64_t) {
  double flops = 0.0;
  for (const Parameter* p : parameters())
    if (p->value.dim() >= 2) flops += 2.0 * static_cast<double>(p->value.numel());
  return flops;
}

}  // namespace ternion
