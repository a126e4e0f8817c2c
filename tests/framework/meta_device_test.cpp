// The meta device: tensors with shapes and no memory, counted by the meta allocator in the
// CPU caching allocator's blocks; copies and fills check their arguments and move nothing.
#include <gtest/gtest.h>

#include "framework/allocator.h"
#include "framework/device_runtime.h"
#include "framework/tensor.h"

namespace ternion {
namespace {

TEST(MetaDevice, CountsWhatItWouldAllocateAndHoldsNothing) {
  const Device meta = Device::meta();
  const std::size_t before = device_memory_stats(meta).in_use;
  reset_device_peak_memory(meta);
  {
    Tensor a = Tensor::empty({1000, 3}, DType::F32, meta);
    EXPECT_EQ(a.device(), meta);
    EXPECT_FALSE(a.has_data());
    EXPECT_THROW(a.data<float>(), Error);
    EXPECT_EQ(device_memory_stats(meta).in_use - before, CachingAllocator::block_size(12000));
    Tensor b = Tensor::shape_only({10});
    EXPECT_EQ(b.device(), meta);
  }
  EXPECT_EQ(device_memory_stats(meta).in_use, before);
  EXPECT_EQ(device_memory_stats(meta).peak - before,
            CachingAllocator::block_size(12000) + CachingAllocator::block_size(40));
}

TEST(MetaDevice, CopiesMoveNothingAndReadAsZeros) {
  Tensor meta = Tensor::empty({4}, DType::F32, Device::meta());
  Tensor host = Tensor::from_vector({1, 2, 3, 4}, {4});
  meta.copy_from(host);
  host.copy_from(meta);  // the host tensor keeps its values
  EXPECT_EQ(host.to_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(meta.to_vector(), (std::vector<float>{0, 0, 0, 0}));
  meta.fill(7.0f);
  meta.zero();
  EXPECT_EQ(host.to(Device::meta()).device(), Device::meta());
  EXPECT_THROW(meta.copy_from(Tensor::empty({5}, DType::F32, Device::meta())), Error);
}

}  // namespace
}  // namespace ternion
