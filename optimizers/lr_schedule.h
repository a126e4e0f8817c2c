// Learning rate at optimizer step s (1-based) of N:
//   warm-up   s <= W:  lr * s / W
//   decay     s >  W:  min_lr + (lr - min_lr) * f((s - W) / (N - W)), f from 1 at the start
//             to 0 at the last step: cosine 0.5 (1 + cos(pi x)), linear 1 - x, constant 1
//             (constant keeps lr).
#pragma once

#include <cstdint>

#include "optimizers/optimizer_config.h"

namespace ternion {

double learning_rate_at(const OptimizerConfig& config, std::int64_t step, std::int64_t total_steps);

}  // namespace ternion
