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
// The factor that brings `norm` down to `max_norm` (1 if it is already below, or max_norm is 0).
float clip_factor(double norm, double max_norm);

}  // namespace ternion
