// Learning rate at optimizer step s (1-based) of N, with W warm-up steps and the last D steps
// decaying (D = decay_steps, or N - W where that is 0):
//   warm-up   s <= W:          lr * s / W          (the last warm-up step at the peak)
//   stable    W < s <= N - D:  lr
//   decay     s >  N - D:      min_lr + (lr - min_lr) * f((s - (N - D) - 1) / D), f from 1 to 0:
//             cosine 0.5 (1 + cos(pi x)), linear 1 - x, sqrt 1 - sqrt(x), constant 1 (constant
//             keeps lr).
// llm.c's schedule: the last warm-up step and the first after it both run at the peak (the
// decay starts at the peak, as in nanoGPT and Megatron; torchtitan's starts one step into it),
// and the decay would reach min_lr one step after the last: no step is spent at min_lr (a zero
// rate by default), and a one-step run trains at lr. A stable stretch (D < N - W) makes it
// warm-up-stable-decay (torchtitan's decay_ratio, Megatron's WSD): a longer run keeps the
// decay at its end.
#pragma once

#include <cstdint>
#include <string>

#include "optimizers/optimizer_config.h"

namespace ternion {

double learning_rate_at(const OptimizerConfig& config, std::int64_t step, std::int64_t total_steps);

// The schedule in a phrase for the run's start-up line ("lr 0.0006, warm-up 100 steps, cosine
// to 6e-05"), naming the settings that the run never reaches or that have no effect.
std::string describe_schedule(const OptimizerConfig& config, std::int64_t total_steps);

}  // namespace ternion
