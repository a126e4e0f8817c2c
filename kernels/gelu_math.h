// GELU's scalar math, shared by the CPU loop and the CUDA kernel.
//
// GPT-2's tanh approximation, gelu(x) = 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
// is evaluated in the equivalent form x * s with s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u):
// one exponential (fast_exp, which vectorises) and, unlike 1 - 2 / (exp(2u) + 1), no
// cancellation near 0. The derivative
//   gelu'(x) = s + x s (1 - s) 2 u'(x),   u'(x) = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// takes 1 - s as e s, which stays accurate where s rounds to 1 (the float 1 - s would lose
// every digit there). e is clamped at exp(80) so that it stays finite and e s never is inf * 0;
// at that point s < 2e-35 and gelu, gelu' are zero to float precision anyway (and 1 + e stays
// inside fast_divide's range). On a GPU fast_exp and fast_divide are the special-function
// unit's, a few ulps (kernels/vector_math.h), so that the kernels stay memory-bound.
#pragma once

#include "framework/features.h"
#include "kernels/vector_math.h"

namespace ternion {

namespace gelu_detail {
template <class T>
inline constexpr T kTwoSqrt2OverPi = static_cast<T>(2.0 * 0.79788456080286535587989211986876);
template <class T>
inline constexpr T kCubic = static_cast<T>(0.044715);

template <class T>
TN_HOST_DEVICE inline T exp_minus_two_u(T x) {
  T minus_two_u = -kTwoSqrt2OverPi<T> * (x + kCubic<T> * x * x * x);
  return fast_exp(minus_two_u < static_cast<T>(80) ? minus_two_u : static_cast<T>(80));
}

// Past |x| = kFlat, gelu is x or 0 and gelu' 1 or 0 to float precision. x is clamped there
// where it matters: below -kFlat, e's clamp would otherwise leave gelu = x / (1 + e^80) growing
// with |x| (-5e3 at -3e38) and gelu' = s + x s (e s) u' growing like x^3 (-3.9 at -1e12); and
// x^2 overflows near 1e20 (a NaN in gelu').
inline constexpr double kFlat = 20.0;
}  // namespace gelu_detail

template <class T>
TN_HOST_DEVICE inline T gelu_value(T x) {
  constexpr T low = -static_cast<T>(gelu_detail::kFlat);
  x = x < low ? low : x;
  return fast_divide(x, static_cast<T>(1) + gelu_detail::exp_minus_two_u(x));
}

template <class T>
TN_HOST_DEVICE inline T gelu_derivative(T x) {
  using namespace gelu_detail;
  constexpr T flat = static_cast<T>(kFlat);
  x = x < -flat ? -flat : (x > flat ? flat : x);
  const T e = exp_minus_two_u(x);
  const T s = fast_divide(static_cast<T>(1), static_cast<T>(1) + e);
  const T two_du = kTwoSqrt2OverPi<T> * (static_cast<T>(1) + static_cast<T>(3) * kCubic<T> * x * x);
  return s + x * s * (e * s) * two_du;
}

}  // namespace ternion
