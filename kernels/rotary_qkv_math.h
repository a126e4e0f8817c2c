// Rotary position embedding's scalar math (Hugging Face Llama's, rotate-half convention), shared
// by the CPU kernel, the CUDA kernel and the host code of a KV-cache decoder, so that all rotate
// by the same angles.
//
// Pair i of a head of size hs (even) is (x[i], x[i + hs/2]), i in [0, hs/2); at position p it
// turns by angle = p * inv_freq[i], inv_freq[i] = 1 / theta^(2i / hs):
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

TN_HOST_DEVICE inline float rotary_inv_freq(std::int64_t pair, std::int64_t head_size,
                                            double theta) {
  return 1.0f / powf(static_cast<float>(theta),
                     static_cast<float>(2 * pair) / static_cast<float>(head_size));
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
                                              std::int64_t position, double theta) {
  const std::int64_t half = head_size / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    T c, s;
    rotary_cos_sin(rotary_angle(position, rotary_inv_freq(i, head_size, theta)), c, s);
    rotary_rotate_pair(x[i], x[i + half], c, s, y[i], y[i + half]);
  }
}

}  // namespace ternion
