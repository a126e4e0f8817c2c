// Elementwise helpers on contiguous f32 tensors of equal numel.
//   add         out = a + b              (residual forward; out may alias a or b)
//   accumulate  out += x                 (residual streams, gradient accumulation)
//   scale       x *= factor
//   sum_of_squares(x)  -> sum x^2 in double
//   sums_of_squares(xs) -> each tensor's sum x^2 in double (gradient norms); on a GPU one
//                          launch and one host synchronisation for all of them
//   all_finite(x)      -> no NaN or Inf
//   zero_many(xs)      every tensor's elements set to 0 (a step's gradients); on a GPU one
//                      launch for all of them, not one memset each
#pragma once

#include <span>
#include <vector>

#include "framework/tensor.h"

namespace ternion {

void add(Tensor& out, const Tensor& a, const Tensor& b);
void accumulate(Tensor& out, const Tensor& x);
void scale(Tensor& x, float factor);
double sum_of_squares(const Tensor& x);
std::vector<double> sums_of_squares(std::span<const Tensor> xs);
bool all_finite(const Tensor& x);
void zero_many(std::span<Tensor> xs);

}  // namespace ternion
