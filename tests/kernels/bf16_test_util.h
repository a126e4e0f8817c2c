// Shared by the tests of bf16 tensors on CPU ops (staged through f32, kernels/convert.h).
#pragma once

#include <cstdint>

#include "kernels/convert.h"
#include "tests/test_util.h"

namespace ternion::test {

// A CPU f32 tensor of uniform values in [lo, hi).
inline Tensor random_f32(const Shape& shape, std::uint64_t seed, float lo = -1.0f,
                         float hi = 1.0f) {
  return Tensor::from_vector(
      random_floats(static_cast<std::size_t>(shape_numel(shape)), seed, lo, hi), shape);
}

// A bf16 copy of an f32 CPU tensor.
inline Tensor to_bf16(const Tensor& f32) {
  Tensor bf16 = Tensor::empty(f32.shape(), DType::BF16);
  convert(bf16, f32);
  return bf16;
}

// The values a bf16 op sees: f32 rounded to bf16, as an f32 tensor.
inline Tensor rounded(const Tensor& f32) { return as_f32(to_bf16(f32)); }

}  // namespace ternion::test
