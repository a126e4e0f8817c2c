// Global gradient norm and clipping.
//
// The norm is sqrt(sum over parameters of sum grad^2), accumulated in double. The sum of
// squares is returned separately so that parallel layouts can add the partial sums of their
// shards (each parameter counted once) before taking the root.
#pragma once

#include <vector>

#include "framework/parameter.h"

namespace ternion {

double grad_sum_of_squares(const std::vector<Parameter*>& params);
// The factor that brings `norm` down to `max_norm`: PyTorch's clip_grad_norm_,
// min(1, max_norm / (norm + 1e-6)), so a norm within 1e-6 below max_norm is scaled too (1 where
// max_norm is 0, clipping off, or the norm is not a number).
float clip_factor(double norm, double max_norm);

}  // namespace ternion
