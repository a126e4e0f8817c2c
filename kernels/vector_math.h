// exp, sqrt and division as each device does them fastest: on the CPU, code the compiler
// vectorises on AVX2 and AVX-512 alike (with the flags of the top CMakeLists.txt:
// -fno-math-errno, -fno-trapping-math); on a GPU, the special-function unit.
//
// glibc's expf is a function call the compiler cannot vectorise (its SIMD variants are only
// declared under -ffast-math), and the softmaxes and GELUs of a training step evaluate tens of
// millions of exponentials.
//
// fast_exp(float), on the CPU: after Cephes' expf. Range reduction x = n ln2 + r with
// |r| <= ln2/2, a degree-6 polynomial for e^r, and 2^n built from its exponent bits; every
// step is an add, multiply, min, max, conversion or shift, all of which have vector forms.
// Relative error below 1e-7 (measured 8.4e-8) over [-87, 88]; NaN propagates; 0 from about -87.7
// (where e^x leaves the normal floats) and +inf from about 88.4 (0.3 short of FLT_MAX's logarithm).
// In device code it is __expf instead (the reason and its error at the function).
//
// fast_divide(a, b): a / b on the CPU, __fdividef in device code.
//
// fast_sqrt(float): on the CPU std::sqrt, one vector instruction (correctly rounded) under
// -fno-math-errno. In device code newton_sqrt: the bit-level guess of 1/sqrt(x) (within 3.5%),
// three Newton steps (1.75e-3, then 5e-6, then below float rounding), times x: relative error
// below 2e-7 (measured 1.7e-7) for positive normal x; 0 at 0, +inf at +inf, NaN for NaN; only
// a rough value for subnormal x, negligible next to AdamW's eps. On the CPU the same bit
// trick kept AdamW's loop scalar on AVX2 (7x slower than std::sqrt at 124M parameters).
//
// The double overloads are the library's functions: the double instantiations are the test
// reference and should be as exact as the library makes them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "framework/features.h"

namespace ternion {

namespace detail {

// e^x on the CPU for x already clamped to [-88, 89] (or NaN): see the header comment.
inline float exp_of_clamped(float clamped) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split in two, so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  // n = round(clamped * log2 e): adding and subtracting 1.5 * 2^23 rounds to an integer in
  // the default rounding mode (std::nearbyint would do, but needs SSE4.1 to vectorise).
  constexpr float kRoundingShift = 12582912.0f;
  const float shifted = clamped * kLog2e + kRoundingShift;
  const float n = shifted - kRoundingShift;
  const float r = clamped - n * kLn2Hi - n * kLn2Lo;
  // e^r = 1 + r + r^2 P(r), P of degree 4 fitted for the least relative error on |r| <= ln2/2
  // (6e-8 evaluated in float, as good as Cephes' degree 5, one multiply-add fewer).
  float poly = 1.3814566191e-3f;
  poly = poly * r + 8.3687081933e-3f;
  poly = poly * r + 4.1668388993e-2f;
  poly = poly * r + 1.6666521132e-1f;
  poly = poly * r + 4.9999994040e-1f;
  const float e_r = poly * (r * r) + r + 1.0f;
  // 2^n's bits without a conversion: shifted's low bits hold n (its bits are 0x4B400000 + n),
  // and the shift by 23 drops the rest.
  std::uint32_t shifted_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  const std::uint32_t exponent_bits = (shifted_bits + 127u) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &exponent_bits, sizeof two_to_n);
  return e_r * two_to_n;
}

}  // namespace detail

TN_HOST_DEVICE inline float fast_exp(float x) {
#if defined(__CUDA_ARCH__)
  // On a GPU: the special-function unit's 2^x (__expf: a multiply and ex2.approx). Cephes'
  // twenty arithmetic instructions would make the kernels that take an exponential per element
  // (the cross-entropy twice per logit, GELU) bound by instruction issue instead of memory.
  // Error 2 + 1.17|x| ulps (CUDA's table), so about 1e-6 relative for the |x| < 20 that
  // matter. Without -ftz, subnormal results are kept (three instructions more than
  // ex2.approx.ftz; the CPU's version returns 0 below about -87.7). The kernels are compared
  // with the CPU's to tolerance, never bits.
  return __expf(x);
#else
  // The clamp keeps n in [-127, 128], whose 2^n bits are 0 and +inf: the ends come out of the
  // arithmetic, with no select after it. std::max and std::min in this order let NaN through
  // and compile to vmaxps and vminps.
  return detail::exp_of_clamped(std::min(std::max(x, -88.0f), 89.0f));
#endif
}

// fast_exp for an x known to be at most 89, such as a softmax's x - max: the same value,
// without the upper clamp (a row's sum of exponentials takes 16% less on AVX2). Above 89 the
// result is meaningless (not +inf).
TN_HOST_DEVICE inline float fast_exp_bounded(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return detail::exp_of_clamped(std::max(x, -88.0f));
#endif
}

TN_HOST_DEVICE inline double fast_exp(double x) { return std::exp(x); }
TN_HOST_DEVICE inline double fast_exp_bounded(double x) { return std::exp(x); }

// The device's sqrt (see the header comment), on the host too so that it is tested there.
// For x >= 0 (a negative x gives an unspecified value, never a trap).
TN_HOST_DEVICE inline float newton_sqrt(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = 0x5F375A86u - (bits >> 1);  // 1/sqrt(x) within 3.5%: halve the exponent, negate
  float inv_sqrt;
  std::memcpy(&inv_sqrt, &bits, sizeof inv_sqrt);
  const float half_x = 0.5f * x;
  for (int newton_step = 0; newton_step < 3; ++newton_step)
    inv_sqrt = inv_sqrt * (1.5f - half_x * inv_sqrt * inv_sqrt);
  const float root = x * inv_sqrt;
  return x > 0.0f && x < std::numeric_limits<float>::infinity() ? root : x;
}

TN_HOST_DEVICE inline float fast_sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return newton_sqrt(x);
#else
  return std::sqrt(x);
#endif
}

TN_HOST_DEVICE inline double fast_sqrt(double x) { return std::sqrt(x); }

// a / b for 0 < |b| < 2^126: on the CPU the division itself (one vector instruction), on a
// GPU __fdividef (a reciprocal on the special-function unit and a multiply, 2 ulps) where IEEE
// division costs a Newton iteration and a slow-path check in every thread.
TN_HOST_DEVICE inline float fast_divide(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}

TN_HOST_DEVICE inline double fast_divide(double a, double b) { return a / b; }

}  // namespace ternion
