// Rotary position embedding's scalar math (Hugging Face Llama's, rotate-half convention), shared
// by the CPU kernel, the CUDA kernel and the host code of a KV-cache decoder, so that all rotate
// by the same angles.
//
// Pair i of a head of size hs (even) is (x[i], x[i + hs/2]), i in [0, hs/2); at position p it
// turns by angle = p * inv_freq[i], inv_freq[i] = 1 / theta^(2i / hs) (scaled as below where
// RotaryParameters::scaling_factor is set):
//   y[i]        = x[i] c - x[i + hs/2] s
//   y[i + hs/2] = x[i + hs/2] c + x[i] s          c = cos(angle), s = sin(angle)
// The transpose (the backward) is the same turn with -s.
//
// inv_freq and the angle are f32 as Hugging Face computes them (a long position's angle keeps
// f32's rounding, as in the models we load); cos and sin are then taken in the kernel's
// precision with the accurate library functions (on a GPU sincosf, not __sinf: the angles reach
// thousands of radians, where the fast forms lose every digit).
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>

#include "framework/features.h"

namespace ternion {

// The base, and Llama 3.1's frequency scaling (transformers' rope_type "llama3") where
// scaling_factor > 0: with wavelength w = 2 pi / inv_freq, frequencies of w below
// original_context / high_freq_factor stay, those of w above original_context /
// low_freq_factor are divided by scaling_factor, and those between blend the two linearly in
// original_context / w. Implicit from a theta alone (no scaling).
struct RotaryParameters {
  double theta = 10000.0;
  double scaling_factor = 0.0;  // 0: no scaling
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  double original_context = 8192.0;
  TN_HOST_DEVICE RotaryParameters(double base = 10000.0) : theta(base) {}
  TN_HOST_DEVICE bool scaled() const { return scaling_factor > 0.0; }
};

// In f32, as transformers computes it (the tables it builds are f32 tensors).
TN_HOST_DEVICE inline float rotary_inv_freq(std::int64_t pair, std::int64_t head_size,
                                            const RotaryParameters& rope) {
  const float inv_freq = 1.0f / powf(static_cast<float>(rope.theta),
                                     static_cast<float>(2 * pair) / static_cast<float>(head_size));
  if (!rope.scaled()) return inv_freq;
  const float factor = static_cast<float>(rope.scaling_factor);
  const float context = static_cast<float>(rope.original_context);
  const float low = static_cast<float>(rope.low_freq_factor);
  const float high = static_cast<float>(rope.high_freq_factor);
  const float wavelength = 6.283185307179586f / inv_freq;
  if (wavelength < context / high) return inv_freq;            // high frequencies stay
  if (wavelength > context / low) return inv_freq / factor;     // low ones slow down
  const float smooth = (context / wavelength - low) / (high - low);
  return (1.0f - smooth) * inv_freq / factor + smooth * inv_freq;
}

TN_HOST_DEVICE inline float rotary_angle(std::int64_t position, float inv_freq) {
  return static_cast<float>(position) * inv_freq;
}

TN_HOST_DEVICE inline void rotary_cos_sin(float angle, float& c, float& s) {
#if defined(__CUDA_ARCH__)
  sincosf(angle, &s, &c);
#else
  c = std::cos(angle);
  s = std::sin(angle);
#endif
}

// The double kernels (the gradient tests' reference) turn by the same f32 angle.
TN_HOST_DEVICE inline void rotary_cos_sin(float angle, double& c, double& s) {
  c = cos(static_cast<double>(angle));
  s = sin(static_cast<double>(angle));
}

// (y0, y1) = the pair (x0, x1) turned by (c, s); pass -s for the transpose.
template <class T>
TN_HOST_DEVICE inline void rotary_rotate_pair(T x0, T x1, T c, T s, T& y0, T& y1) {
  y0 = x0 * c - x1 * s;
  y1 = x1 * c + x0 * s;
}

// One head x [head_size] turned to `position` into y (y may be x): a decoder's new query or key.
template <class T>
TN_HOST_DEVICE inline void rotary_rotate_head(T* y, const T* x, std::int64_t head_size,
                                              std::int64_t position,
                                              const RotaryParameters& rope) {
  const std::int64_t half = head_size / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    T c, s;
    rotary_cos_sin(rotary_angle(position, rotary_inv_freq(i, head_size, rope)), c, s);
    rotary_rotate_pair(x[i], x[i + half], c, s, y[i], y[i + half]);
  }
}

}  // namespace ternion
