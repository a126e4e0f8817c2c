#include "optimizers/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ternion {

double learning_rate_at(const OptimizerConfig& c, std::int64_t step, std::int64_t total_steps) {
  if (c.warmup_steps > 0 && step <= c.warmup_steps)
    return c.lr * static_cast<double>(step) / static_cast<double>(c.warmup_steps);
  if (c.decay == "constant") return c.lr;
  const std::int64_t decay_steps = total_steps - c.warmup_steps;
  if (decay_steps <= 0) return c.lr;
  const double x =
      std::clamp(static_cast<double>(step - c.warmup_steps - 1) / decay_steps, 0.0, 1.0);
  const double f = c.decay == "linear" ? 1.0 - x : 0.5 * (1.0 + std::cos(M_PI * x));
  return c.min_lr + (c.lr - c.min_lr) * f;
}

}  // namespace ternion
