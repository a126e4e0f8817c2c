#include "optimizers/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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

std::string describe_schedule(const OptimizerConfig& c, std::int64_t total_steps) {
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", value);
    return std::string(text);
  };
  std::string out = "lr " + number(c.lr);
  if (c.warmup_steps > 0) out += ", warm-up " + std::to_string(c.warmup_steps) + " steps";
  if (c.warmup_steps > total_steps)
    return out + ": longer than the run, lr " +
           number(learning_rate_at(c, total_steps, total_steps)) + " at its last step";
  if (c.warmup_steps == total_steps) return out + ": the whole run, no decay";
  if (c.decay == "constant")
    return out + (c.min_lr > 0 ? ", constant: optimizer.min_lr has no effect" : ", constant");
  return out + ", " + c.decay + " to " + number(c.min_lr);
}

}  // namespace ternion
