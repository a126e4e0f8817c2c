// Element types. F32 has kernels on both devices, BF16 (mixed-precision compute) on CUDA;
// token tensors are I32 (or U16 on disk). F16 is declared for file formats only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "framework/bfloat16.h"

namespace ternion {

enum class DType : std::uint8_t { F32, BF16, F16, I32, U16 };

constexpr std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::U16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::U16: return "u16";
  }
  return "?";
}

// The C++ type behind a dtype, for typed access (`tensor.data<float>()` checks it).
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<std::uint16_t>() { return DType::U16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BF16; }

}  // namespace ternion
