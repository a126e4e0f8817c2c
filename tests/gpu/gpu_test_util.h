// Shared by the `gpu` tests: each CUDA op against the CPU op on the same random inputs.
//
// Every test starts with TN_REQUIRE_GPU(): where no CUDA device is usable (a CPU-only build,
// no driver, no GPU: CI) the test is skipped with the reason, never failed or silently passed.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "framework/device_runtime.h"
#include "framework/tensor.h"
#include "kernels/convert.h"
#include "test_util.h"

namespace ternion::test {

#define TN_REQUIRE_GPU()                                                                    \
  do {                                                                                      \
    if (::ternion::cuda_device_count() == 0)                                                \
      GTEST_SKIP() << "no CUDA device: " << ::ternion::cuda_unavailable_reason();         \
    ::ternion::init_cuda_device(0);                                                         \
  } while (0)

inline Device gpu() { return Device::cuda(0); }

// A copy of a CPU tensor on the GPU, optionally converted to `dtype` there.
inline Tensor to_gpu(const Tensor& cpu_tensor, DType dtype = DType::F32) {
  Tensor on_gpu = Tensor::empty(cpu_tensor.shape(), cpu_tensor.dtype(), gpu());
  on_gpu.copy_from(cpu_tensor.contiguous());
  if (dtype == on_gpu.dtype()) return on_gpu;
  Tensor converted = Tensor::empty(on_gpu.shape(), dtype, gpu());
  convert(converted, on_gpu);
  return converted;
}

// The values of a device tensor (any float dtype), as F32 on the host.
inline std::vector<float> to_host_floats(const Tensor& t) {
  Tensor f32 = as_f32(t.contiguous());
  Tensor host = Tensor::empty(f32.shape(), DType::F32, Device::cpu());
  host.copy_from(f32);
  return host.to_vector();
}

// A CPU f32 tensor of uniform values in [lo, hi).
inline Tensor random_tensor(const Shape& shape, std::uint64_t seed, float lo = -1.0f,
                            float hi = 1.0f) {
  return Tensor::from_vector(
      random_floats(static_cast<std::size_t>(shape_numel(shape)), seed, lo, hi), shape);
}

// The same values rounded to bf16 (what a bf16 GPU op sees as input), as a CPU f32 tensor.
inline Tensor round_to_bf16(const Tensor& cpu_f32) {
  Tensor bf16 = Tensor::empty(cpu_f32.shape(), DType::BF16, Device::cpu());
  convert(bf16, cpu_f32);
  return as_f32(bf16);
}

}  // namespace ternion::test
