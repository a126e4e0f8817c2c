#include "optimizers/grad_clip.h"

#include "kernels/elementwise.h"

namespace ternion {

double grad_sum_of_squares(const std::vector<Parameter*>& params) {
  double total = 0.0;
  for (const Parameter* p : params) total += sum_of_squares(p->grad);
  return total;
}

float clip_factor(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace ternion
