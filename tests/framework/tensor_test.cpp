#include "framework/tensor.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ternion {
namespace {

Tensor iota_tensor(const Shape& shape) {
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)));
  std::iota(values.begin(), values.end(), 0.0f);
  return Tensor::from_vector(values, shape);
}

TEST(Tensor, ShapeStridesAndStr) {
  Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.str(), "f32[2, 3, 4] cpu");
  EXPECT_EQ(t.nbytes(), 96u);
}

// An allocation the machine cannot satisfy names its size, dtype and shape.
TEST(Tensor, AnImpossibleAllocationIsAMemoryErrorWithItsSize) {
  const std::int64_t huge = std::int64_t{1} << 45;  // 140 TB of f32
  try {
    Tensor::empty({huge}, DType::F32);
    FAIL() << "allocated " << huge * 4 << " bytes";
  } catch (const MemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory: 140737488355328 bytes for a f32 tensor "
                                         "of shape [35184372088832] on cpu"),
              std::string::npos)
        << e.what();
  }
}

TEST(Tensor, ViewSharesStorageAndInfersOneDimension) {
  Tensor t = iota_tensor({2, 3, 4});
  Tensor v = t.view({-1, 4});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_TRUE(v.shares_storage_with(t));
  v.data<float>()[5] = 100.0f;
  EXPECT_EQ(t.data<float>()[5], 100.0f);
  EXPECT_THROW(t.view({5, -1}), InternalError);
  EXPECT_THROW(t.view({-1, -1}), InternalError);
}

TEST(Tensor, SliceAlongFirstDimensionStaysContiguous) {
  Tensor t = iota_tensor({4, 3});
  Tensor s = t.slice(0, 1, 2);
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_EQ(s.to_vector(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
}

TEST(Tensor, SliceAlongLastDimensionIsStridedAndCopiesCorrectly) {
  Tensor t = iota_tensor({3, 4});
  Tensor s = t.slice(1, 1, 2);
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.to_vector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  Tensor c = s.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_storage_with(t));
  // Writing through a strided view lands in the right elements.
  Tensor ones = Tensor::full({3, 2}, -1.0f);
  s.copy_from(ones);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{0, -1, -1, 3, 4, -1, -1, 7, 8, -1, -1, 11}));
}

TEST(Tensor, ContiguityIgnoresDimensionsOfExtentOne) {
  Tensor t = iota_tensor({1, 3, 4});
  EXPECT_TRUE(t.slice(2, 0, 4).slice(1, 1, 1).is_contiguous());  // [1, 1, 4]: one gapless row
  EXPECT_FALSE(iota_tensor({2, 3, 4}).slice(1, 1, 1).is_contiguous());  // two rows, a gap between
  EXPECT_EQ(t.slice(1, 2, 1).view({4}).to_vector(), (std::vector<float>{8, 9, 10, 11}));
}

TEST(Tensor, SliceOfMiddleDimensionAndSelect) {
  Tensor t = iota_tensor({2, 3, 2});
  Tensor s = t.slice(1, 2, 1);  // [2, 1, 2]
  EXPECT_EQ(s.to_vector(), (std::vector<float>{4, 5, 10, 11}));
  Tensor row = t.select(0, 1);
  EXPECT_EQ(row.shape(), (Shape{3, 2}));
  EXPECT_EQ(row.to_vector()[0], 6.0f);
  EXPECT_THROW(t.slice(1, 2, 2), InternalError);
  EXPECT_THROW(t.slice(3, 0, 1), InternalError);
}

TEST(Tensor, TypedAccessChecksDtype) {
  Tensor tokens = Tensor::zeros({4}, DType::I32);
  EXPECT_NO_THROW(tokens.data<std::int32_t>());
  EXPECT_THROW(tokens.data<float>(), InternalError);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_name(DType::U16), "u16");
}

TEST(Tensor, CudaTensorsNeedTheDeviceRuntime) {
  EXPECT_THROW(Tensor::empty({4}, DType::F32, Device::cuda(0)), CudaError);
}

TEST(Tensor, WrapKeepsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  Tensor t = Tensor::wrap(owner->data(), {3}, DType::F32, Device::cpu(), owner);
  std::weak_ptr<std::vector<float>> weak = owner;
  owner.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(t.to_vector(), (std::vector<float>{1, 2, 3}));
  t = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(CachingAllocator, ReusesFreedBlocksAndTracksUsage) {
  HostAllocator host;
  CachingAllocator cache(host);
  void* a = cache.allocate(1 << 20);
  EXPECT_GE(cache.bytes_in_use(), std::size_t{1} << 20);
  cache.deallocate(a, 1 << 20);
  EXPECT_EQ(cache.bytes_in_use(), 0u);
  void* b = cache.allocate((1 << 20) - 100);  // rounds to the same block size
  EXPECT_EQ(a, b);
  cache.deallocate(b, (1 << 20) - 100);
  EXPECT_GE(cache.peak_bytes_in_use(), std::size_t{1} << 20);
  cache.release_cached();
  EXPECT_EQ(cache.bytes_reserved(), 0u);
}

}  // namespace
}  // namespace ternion
