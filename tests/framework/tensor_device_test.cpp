// Device-facing Tensor behaviour that the CPU can check: to_vector of BF16, `to(cpu)`, the
// device runtime's answers where no CUDA device is usable, CPU memory statistics and CPU
// timestamps.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "framework/bfloat16.h"
#include "framework/device_runtime.h"
#include "framework/tensor.h"

namespace ternion {
namespace {

Tensor iota_tensor(const Shape& shape) {
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)));
  std::iota(values.begin(), values.end(), 0.0f);
  return Tensor::from_vector(values, shape);
}

TEST(TensorDevice, ToVectorOfBf16ConvertsEachElement) {
  const std::vector<float> values{0.0f, -1.5f, 3.140625f, 1.0e-3f, -65504.0f, 7.0f};
  Tensor bf16 = Tensor::empty({2, 3}, DType::BF16);
  for (std::size_t i = 0; i < values.size(); ++i)
    bf16.data<BFloat16>()[i] = float_to_bf16(values[i]);
  const std::vector<float> got = bf16.to_vector();
  ASSERT_EQ(got.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(got[i], bf16_to_float(float_to_bf16(values[i]))) << "element " << i;
  EXPECT_EQ(got[1], -1.5f);  // exactly representable values come back unchanged
  EXPECT_EQ(got[2], 3.140625f);
}

TEST(TensorDevice, ToVectorOfStridedBf16ReadsRowMajor) {
  Tensor bf16 = Tensor::empty({3, 4}, DType::BF16);
  for (int i = 0; i < 12; ++i) bf16.data<BFloat16>()[i] = float_to_bf16(static_cast<float>(i));
  const std::vector<float> column = bf16.slice(1, 1, 2).to_vector();
  EXPECT_EQ(column, (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TEST(TensorDevice, ToVectorRejectsIntegerTensors) {
  Tensor ints = Tensor::zeros({4}, DType::I32);
  EXPECT_THROW(ints.to_vector(), InternalError);
}

TEST(TensorDevice, ToSameDeviceIsContiguousAndSharesStorageWhenItCan) {
  Tensor t = iota_tensor({3, 4});
  Tensor same = t.to(Device::cpu());
  EXPECT_TRUE(same.shares_storage_with(t));

  Tensor column = t.slice(1, 2, 2);  // strided
  Tensor copy = column.to(Device::cpu());
  EXPECT_TRUE(copy.is_contiguous());
  EXPECT_FALSE(copy.shares_storage_with(t));
  EXPECT_EQ(copy.shape(), (Shape{3, 2}));
  EXPECT_EQ(copy.to_vector(), (std::vector<float>{2, 3, 6, 7, 10, 11}));
}

TEST(TensorDevice, WithoutAUsableDeviceCudaIsRefusedClearly) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is usable here";
  EXPECT_FALSE(cuda_unavailable_reason().empty());
  EXPECT_THROW(init_cuda_device(0), CudaError);
  // No CUDA allocator is installed, so CUDA storage cannot be made.
  EXPECT_THROW(Tensor::empty({4}, DType::F32, Device::cuda(0)), CudaError);
  EXPECT_THROW(iota_tensor({4}).to(Device::cuda(0)), CudaError);
}

TEST(TensorDevice, CpuMemoryStatsFollowTheCachingAllocator) {
  device_synchronize(Device::cpu());  // a no-op, but must not throw
  reset_device_peak_memory(Device::cpu());
  const DeviceMemoryStats before = device_memory_stats(Device::cpu());
  EXPECT_EQ(before.peak, before.in_use);
  EXPECT_GE(before.reserved, before.in_use);
  {
    Tensor big = Tensor::empty({1 << 20});  // 4 MiB: its own size class
    const DeviceMemoryStats during = device_memory_stats(Device::cpu());
    EXPECT_EQ(during.in_use, before.in_use + (std::size_t{4} << 20));
    EXPECT_GE(during.peak, during.in_use);
  }
  const DeviceMemoryStats after = device_memory_stats(Device::cpu());
  EXPECT_EQ(after.in_use, before.in_use);
  EXPECT_EQ(after.peak, before.in_use + (std::size_t{4} << 20));
  EXPECT_GE(after.reserved, before.in_use + (std::size_t{4} << 20));  // cached, not released
}

TEST(TensorDevice, CpuTimestampsMeasureTheHostClock) {
  const DeviceTimestamp start = record_timestamp(Device::cpu());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const DeviceTimestamp end = record_timestamp(Device::cpu());
  EXPECT_GE(milliseconds_between(start, end), 19.0);
  EXPECT_LE(milliseconds_between(end, start), -19.0);
  EXPECT_THROW(milliseconds_between(DeviceTimestamp(), end), InternalError);  // never recorded
}

}  // namespace
}  // namespace ternion
