// bfloat16: the upper 16 bits of an IEEE float (8-bit exponent, 7-bit mantissa).
//
// Host and device code share these conversions (TN_HOST_DEVICE), so a bf16 value rounded on
// the CPU equals the one rounded in a CUDA kernel: round to nearest, ties to even, NaN kept
// quiet. CUDA kernels may use __nv_bfloat16 intrinsics for arithmetic; the bits are the same.
#pragma once

#include <cstdint>
#include <cstring>

#include "framework/features.h"

namespace ternion {

struct BFloat16 {
  std::uint16_t bits = 0;
};

TN_HOST_DEVICE inline float bf16_to_float(BFloat16 value) {
  const std::uint32_t bits = static_cast<std::uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TN_HOST_DEVICE inline BFloat16 float_to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return BFloat16{static_cast<std::uint16_t>((bits >> 16) | 0x0040u)};  // quiet NaN
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);            // ties to even
  return BFloat16{static_cast<std::uint16_t>((bits + rounding) >> 16)};
}

}  // namespace ternion
