// IEEE 754 half precision (F16: 5-bit exponent, 10-bit mantissa), read only: some checkpoints
// (Llama 2's, for one) are stored in it, and widening to float is exact.
#pragma once

#include <cstdint>
#include <cstring>

namespace ternion {

inline float f16_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  std::uint32_t exponent = (half >> 10) & 0x1Fu, mantissa = half & 0x3FFu;
  std::uint32_t bits;
  if (exponent == 0x1Fu) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // infinity or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: shift the mantissa up to an implicit leading 1, lowering the exponent.
    exponent = 127 - 15 + 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace ternion
