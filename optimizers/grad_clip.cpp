#include "optimizers/grad_clip.h"

#include "kernels/elementwise.h"

namespace ternion {

double grad_sum_of_squares(const std::vector<Parameter*>& params) {
  std::vector<Tensor> grads;
  for (const Parameter* p : params) grads.push_back(p->grad);
  double total = 0.0;
  for (double squares : sums_of_squares(grads)) total += squares;  // one host wait on a GPU
  return total;
}

float clip_factor(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm + 1e-6 > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace ternion
