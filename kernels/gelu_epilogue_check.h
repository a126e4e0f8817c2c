// The judgement behind cuda::gelu_epilogues_agree(): whether GELU values computed elsewhere
// (cuBLASLt's GELU epilogues, which do not say which GELU they compute) are GPT-2's tanh GELU
// (kernels/gelu_math.h) to bf16's rounding. Plain host math, so the tolerance itself is tested
// without a GPU (tests/kernels/test_gelu.cpp): the tanh form rounded to bf16 passes, the erf
// form and a tanh with tanh.approx.f32's error in the tails do not.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

namespace ternion {

// GPT-2's GELU and its derivative in double: 0.5 x (1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3).
inline double gelu_tanh_reference(double x) {
  const double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

inline double gelu_tanh_derivative_reference(double x) {
  const double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u);
  const double du = 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
}

// How far a bf16 result may be from the exact value: one bf16 step (2^-7 relative, twice the
// rounding's worst case, leaving room for the F32 math before it) plus 2^-13 absolute. The
// absolute part is below the erf GELU's distance from the tanh GELU where the two differ most
// in relative terms (4e-4 at x = -3, where gelu is -0.004), so the erf form fails.
inline double gelu_tolerance(double want) { return 0x1p-7 * std::fabs(want) + 0x1p-13; }

struct GeluDeviation {
  double worst = 0.0;  // largest |got - want| / gelu_tolerance(want): at most 1 where all agree
  double x = 0.0;      // the pre-activation where it occurred
  double got = 0.0, want = 0.0;
  bool agrees() const { return worst <= 1.0; }
  // Takes one sample into account. A NaN result counts as disagreeing (and stays the worst).
  void observe(double at, double got_value, double want_value) {
    if (std::isinf(worst)) return;
    double excess = std::fabs(got_value - want_value) / gelu_tolerance(want_value);
    if (std::isnan(excess)) excess = INFINITY;
    if (excess > worst) *this = GeluDeviation{excess, at, got_value, want_value};
  }
};

// The worst of samples (x[i], got[i], want[i]).
inline GeluDeviation worst_gelu_deviation(std::span<const double> x, std::span<const double> got,
                                          std::span<const double> want) {
  GeluDeviation deviation;
  for (std::size_t i = 0; i < x.size() && i < got.size() && i < want.size(); ++i)
    deviation.observe(x[i], got[i], want[i]);
  return deviation;
}

}  // namespace ternion
