#include "optimizers/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ternion {

double learning_rate_at(const OptimizerConfig& c, std::int64_t step, std::int64_t total_steps) {
  if (c.warmup_steps > 0 && step <= c.warmup_steps)
    return c.lr * static_cast<double>(step) / static_cast<double>(c.warmup_steps);
  if (c.decay == "constant") return c.lr;
  const std::int64_t after_warmup = total_steps - c.warmup_steps;
  const std::int64_t decay_steps =
      c.decay_steps > 0 ? std::min(c.decay_steps, after_warmup) : after_warmup;
  if (decay_steps <= 0) return c.lr;
  const std::int64_t decay_start = total_steps - decay_steps;  // the last step at the peak
  const double x = std::clamp(static_cast<double>(step - decay_start - 1) / decay_steps, 0.0, 1.0);
  const double f = c.decay == "linear" ? 1.0 - x
                   : c.decay == "sqrt" ? 1.0 - std::sqrt(x)
                                       : 0.5 * (1.0 + std::cos(M_PI * x));
  return c.min_lr + (c.lr - c.min_lr) * f;
}

std::string describe_schedule(const OptimizerConfig& c, std::int64_t total_steps) {
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", value);
    return std::string(text);
  };
  auto steps = [](std::int64_t n) { return std::to_string(n) + (n == 1 ? " step" : " steps"); };
  std::string out = "lr " + number(c.lr);
  if (c.warmup_steps > 0) out += ", warm-up " + steps(c.warmup_steps);
  if (c.warmup_steps > total_steps)
    return out + ": longer than the run, lr " +
           number(learning_rate_at(c, total_steps, total_steps)) + " at its last step";
  if (c.warmup_steps == total_steps) return out + ": the whole run, no decay";
  if (c.decay == "constant")
    return out + (c.min_lr > 0 ? ", constant: optimizer.min_lr has no effect" : ", constant");
  const std::int64_t after_warmup = total_steps - c.warmup_steps;
  if (c.decay_steps > 0 && c.decay_steps < after_warmup)
    out += ", stable " + steps(after_warmup - c.decay_steps);
  return out + ", " + c.decay + " to " + number(c.min_lr) +
         (c.decay_steps > 0 ? " over " + steps(std::min(c.decay_steps, after_warmup)) : "");
}

}  // namespace ternion
