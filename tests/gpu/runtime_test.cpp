// The CUDA device runtime: binding, host<->device and device<->device copies of every layout
// the CPU's copy_from handles, fills, the caching allocator, and event ordering between the
// compute and communication streams. Copies must be exact, so the oracle is bit equality with
// the same copy done on the CPU.
#include <string>
#include <thread>

#include "framework/features.h"
#include "gpu_test_util.h"

#if TN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#endif

namespace ternion::test {
namespace {

Tensor iota_tensor(const Shape& shape) {
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  return Tensor::from_vector(values, shape);
}

TEST(GpuRuntime, InitBindsLocalRankModuloDeviceCount) {
  TN_REQUIRE_GPU();  // binds local rank 0
  const int count = cuda_device_count();
  ASSERT_GT(count, 0);
  EXPECT_TRUE(cuda_unavailable_reason().empty());
  // Rank `count` maps to the same device as rank 0; and once bound, the device stays.
  EXPECT_EQ(init_cuda_device(count), Device::cuda(0));
  EXPECT_EQ(init_cuda_device(count + 1), Device::cuda(0));
#if TN_HAVE_CUDA
  EXPECT_TRUE(cuda::initialized());
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_NE(cuda::compute_stream(), cuda::comm_stream());
#endif
}

TEST(GpuRuntime, HostDeviceRoundTripIsExact) {
  TN_REQUIRE_GPU();
  const Tensor host = random_tensor({37, 53}, 1);
  Tensor device = Tensor::empty(host.shape(), DType::F32, gpu());
  device.copy_from(host);
  EXPECT_EQ(device.device(), gpu());
  expect_bitwise_equal("to_vector", device.to_vector(), host.to_vector());
  const Tensor back = device.to(Device::cpu());
  EXPECT_TRUE(back.device().is_cpu());
  expect_bitwise_equal("to(cpu)", back.to_vector(), host.to_vector());
  expect_bitwise_equal("to(gpu).to(cpu)", host.to(gpu()).to(Device::cpu()).to_vector(),
                       host.to_vector());
}

TEST(GpuRuntime, ColumnSliceAsSource) {
  TN_REQUIRE_GPU();
  const Tensor host = iota_tensor({16, 24});
  const Tensor device = host.to(gpu());
  const Tensor want = host.slice(1, 5, 7).contiguous();
  // Device (strided) -> host (contiguous).
  Tensor got = Tensor::empty({16, 7});
  got.copy_from(device.slice(1, 5, 7));
  expect_bitwise_equal("slice -> host", got.to_vector(), want.to_vector());
  // Host (strided) -> device (contiguous).
  Tensor device_dst = Tensor::empty({16, 7}, DType::F32, gpu());
  device_dst.copy_from(host.slice(1, 5, 7));
  expect_bitwise_equal("host slice -> device", device_dst.to_vector(), want.to_vector());
  // Device (strided) -> device (contiguous).
  const Tensor on_device = device.slice(1, 5, 7).contiguous();
  EXPECT_TRUE(on_device.is_contiguous());
  EXPECT_EQ(on_device.device(), gpu());
  expect_bitwise_equal("slice.contiguous() on device", on_device.to_vector(), want.to_vector());
}

TEST(GpuRuntime, ColumnSliceAsDestination) {
  TN_REQUIRE_GPU();
  const Tensor src = random_tensor({16, 7}, 2);
  Tensor want = iota_tensor({16, 24});
  want.slice(1, 5, 7).copy_from(src);

  // Host (contiguous) -> device (strided): staged through a device temporary.
  Tensor device = iota_tensor({16, 24}).to(gpu());
  Tensor column = device.slice(1, 5, 7);
  column.copy_from(src);
  expect_bitwise_equal("host -> device slice", device.to_vector(), want.to_vector());

  // Device (contiguous) -> host (strided): staged through a host temporary.
  Tensor host = iota_tensor({16, 24});
  Tensor host_column = host.slice(1, 5, 7);
  host_column.copy_from(src.to(gpu()));
  expect_bitwise_equal("device -> host slice", host.to_vector(), want.to_vector());

  // Device (contiguous) -> device (strided).
  Tensor device2 = iota_tensor({16, 24}).to(gpu());
  Tensor column2 = device2.slice(1, 5, 7);
  column2.copy_from(src.to(gpu()));
  expect_bitwise_equal("device -> device slice", device2.to_vector(), want.to_vector());
}

TEST(GpuRuntime, ThreeDimensionalStridedViewsBothWays) {
  TN_REQUIRE_GPU();
  const Tensor host = random_tensor({6, 8, 10}, 3);
  const Tensor host_view = host.slice(0, 1, 4).slice(1, 2, 5).slice(2, 3, 6);  // [4, 5, 6]
  const Tensor device = host.to(gpu());
  const Tensor device_view = device.slice(0, 1, 4).slice(1, 2, 5).slice(2, 3, 6);
  expect_bitwise_equal("3-D view to host", device_view.to_vector(), host_view.to_vector());

  // Strided source into a strided destination, both on the device, vs the CPU doing the same.
  Tensor want = iota_tensor({5, 9, 12});
  Tensor want_view = want.slice(1, 2, 5).slice(2, 4, 6).slice(0, 0, 4);
  want_view.copy_from(host_view);
  Tensor got = iota_tensor({5, 9, 12}).to(gpu());
  Tensor got_view = got.slice(1, 2, 5).slice(2, 4, 6).slice(0, 0, 4);
  got_view.copy_from(device_view);
  expect_bitwise_equal("strided -> strided on device", got.to_vector(), want.to_vector());

  // BF16 (2-byte elements) through the same paths.
  Tensor host_bf16 = Tensor::empty({6, 8, 10}, DType::BF16);
  convert(host_bf16, host);
  const Tensor device_bf16 = host_bf16.to(gpu());
  expect_bitwise_equal(
      "bf16 3-D view", device_bf16.slice(1, 2, 5).slice(2, 3, 6).to_vector(),
      host_bf16.slice(1, 2, 5).slice(2, 3, 6).to_vector());
}

#if TN_HAVE_CUDA
TEST(GpuRuntime, TransposedStridesMatchTheCpu) {
  TN_REQUIRE_GPU();
  // src [4, 5, 6] row-major into a destination laid out as its [6, 5, 4] transpose: element
  // (i, j, k) goes to k * 20 + j * 4 + i. Tensor has no transposed views, so call the kernel.
  const Tensor host = random_tensor({4, 5, 6}, 4);
  const Tensor device_src = host.to(gpu());
  Tensor device_dst = Tensor::zeros({120}, DType::F32, gpu());
  const long long shape[3] = {4, 5, 6};
  const long long src_strides[3] = {30, 6, 1};
  const long long dst_strides[3] = {1, 4, 20};
  cuda::copy_strided(device_dst.raw_data(), dst_strides, device_src.raw_data(), src_strides,
                     shape, 3, sizeof(float));
  const std::vector<float> src = host.to_vector();
  std::vector<float> want(120);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k) want[k * 20 + j * 4 + i] = src[i * 30 + j * 6 + k];
  expect_bitwise_equal("transpose", device_dst.to_vector(), want);
}
#endif

TEST(GpuRuntime, OverlappingDeviceCopyActsLikeMemmove) {
  TN_REQUIRE_GPU();
  Tensor want = iota_tensor({8, 4});
  want.slice(0, 1, 6).copy_from(want.slice(0, 0, 6).contiguous());
  Tensor device = iota_tensor({8, 4}).to(gpu());
  device.slice(0, 1, 6).copy_from(device.slice(0, 0, 6));
  expect_bitwise_equal("overlapping rows", device.to_vector(), want.to_vector());
}

TEST(GpuRuntime, FillAndZero) {
  TN_REQUIRE_GPU();
  const int n = 100003;  // not a multiple of the block size
  Tensor t = Tensor::full({n}, 2.5f, gpu());
  expect_bitwise_equal("full", t.to_vector(), std::vector<float>(n, 2.5f));
  t.zero();
  expect_bitwise_equal("zero", t.to_vector(), std::vector<float>(n, 0.0f));
  t.fill(-1.0f);
  expect_bitwise_equal("fill", t.to_vector(), std::vector<float>(n, -1.0f));
  expect_bitwise_equal("zeros", Tensor::zeros({3, 5}, DType::F32, gpu()).to_vector(),
                       std::vector<float>(15, 0.0f));
  Tensor bf16 = Tensor::zeros({7}, DType::BF16, gpu());
  expect_bitwise_equal("bf16 zeros", bf16.to_vector(), std::vector<float>(7, 0.0f));
  EXPECT_THROW(bf16.fill(1.0f), InternalError);  // fill is F32 only
}

TEST(GpuRuntime, CloneOnDeviceIsIndependent) {
  TN_REQUIRE_GPU();
  const Tensor host = random_tensor({9, 11}, 5);
  Tensor original = host.to(gpu());
  Tensor copy = original.clone();
  EXPECT_EQ(copy.device(), gpu());
  EXPECT_FALSE(copy.shares_storage_with(original));
  expect_bitwise_equal("clone", copy.to_vector(), host.to_vector());
  copy.fill(0.0f);
  expect_bitwise_equal("original untouched", original.to_vector(), host.to_vector());
  // to() on the same device: itself when contiguous, a contiguous copy when not.
  EXPECT_TRUE(original.to(gpu()).shares_storage_with(original));
  const Tensor column = original.slice(1, 3, 4).to(gpu());
  EXPECT_TRUE(column.is_contiguous());
  EXPECT_FALSE(column.shares_storage_with(original));
}

TEST(GpuRuntime, CachingAllocatorReusesFreedBlocks) {
  TN_REQUIRE_GPU();
  constexpr std::size_t kBytes = std::size_t{4} << 20;  // a size class of its own, exactly
  device_synchronize(gpu());
  const DeviceMemoryStats before = device_memory_stats(gpu());
  void* first_ptr = nullptr;
  std::size_t reserved_with_block = 0;
  {
    Tensor t = Tensor::empty({static_cast<std::int64_t>(kBytes / 4)}, DType::F32, gpu());
    first_ptr = t.raw_data();
    const DeviceMemoryStats during = device_memory_stats(gpu());
    EXPECT_EQ(during.in_use, before.in_use + kBytes);
    EXPECT_GE(during.peak, during.in_use);
    reserved_with_block = during.reserved;
  }
  const DeviceMemoryStats freed = device_memory_stats(gpu());
  EXPECT_EQ(freed.in_use, before.in_use);
  EXPECT_EQ(freed.reserved, reserved_with_block);  // cached, not returned to CUDA
  {
    Tensor again = Tensor::empty({static_cast<std::int64_t>(kBytes / 4)}, DType::F32, gpu());
    EXPECT_EQ(again.raw_data(), first_ptr);  // the cached block
    EXPECT_EQ(device_memory_stats(gpu()).reserved, reserved_with_block);
  }
  reset_device_peak_memory(gpu());
  const DeviceMemoryStats reset = device_memory_stats(gpu());
  EXPECT_EQ(reset.peak, reset.in_use);
  {
    Tensor a = Tensor::empty({static_cast<std::int64_t>(kBytes / 4)}, DType::F32, gpu());
    Tensor b = Tensor::empty({static_cast<std::int64_t>(kBytes / 4)}, DType::F32, gpu());
    EXPECT_EQ(device_memory_stats(gpu()).peak, reset.in_use + 2 * kBytes);
  }
  EXPECT_EQ(device_memory_stats(gpu()).peak, reset.in_use + 2 * kBytes);
  EXPECT_EQ(device_memory_stats(gpu()).in_use, reset.in_use);
}

#if TN_HAVE_CUDA
TEST(GpuRuntime, EventOrdersComputeBeforeComm) {
  TN_REQUIRE_GPU();
  // Big enough that an unordered copy on the comm stream would read `a` before the compute
  // stream has written it.
  const std::int64_t n = std::int64_t{1} << 24;  // 64 MiB of f32
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  Tensor pattern = Tensor::full({n}, 3.0f, gpu());
  Tensor a = Tensor::zeros({n}, DType::F32, gpu());
  Tensor b = Tensor::zeros({n}, DType::F32, gpu());
  cuda::synchronize_compute();

  // compute: a <- pattern (several times, to keep the stream busy); record; comm waits; b <- a.
  for (int i = 0; i < 8; ++i)
    TN_CUDA_CHECK(cudaMemcpyAsync(a.raw_data(), pattern.raw_data(), bytes,
                                  cudaMemcpyDeviceToDevice, cuda::compute_stream()));
  cuda::Event written;
  written.record(cuda::compute_stream());
  written.make_wait(cuda::comm_stream());
  TN_CUDA_CHECK(cudaMemcpyAsync(b.raw_data(), a.raw_data(), bytes, cudaMemcpyDeviceToDevice,
                                cuda::comm_stream()));
  cuda::Event copied;
  copied.record(cuda::comm_stream());
  copied.synchronize();
  EXPECT_TRUE(copied.query());
  EXPECT_TRUE(written.query());
  expect_bitwise_equal("b after comm copy", b.to_vector(), std::vector<float>(n, 3.0f));

  // The other direction with stream_wait: comm writes, compute waits, compute reads.
  Tensor c = Tensor::zeros({n}, DType::F32, gpu());
  Tensor pattern2 = Tensor::full({n}, -7.0f, gpu());
  cuda::synchronize_compute();
  for (int i = 0; i < 8; ++i)
    TN_CUDA_CHECK(cudaMemcpyAsync(c.raw_data(), pattern2.raw_data(), bytes,
                                  cudaMemcpyDeviceToDevice, cuda::comm_stream()));
  cuda::stream_wait(cuda::compute_stream(), cuda::comm_stream());
  expect_bitwise_equal("c read on compute", c.to_vector(), std::vector<float>(n, -7.0f));
  device_synchronize(gpu());
}

TEST(GpuRuntime, EventIsMovable) {
  TN_REQUIRE_GPU();
  cuda::Event first;
  const cudaEvent_t handle = first.get();
  cuda::Event second(std::move(first));
  EXPECT_EQ(second.get(), handle);
  EXPECT_EQ(first.get(),
            nullptr);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  cuda::Event third;
  third = std::move(second);
  EXPECT_EQ(third.get(), handle);
  third.record(cuda::compute_stream());
  third.synchronize();
  EXPECT_TRUE(third.query());
}
#endif

TEST(GpuRuntime, AnotherHostThreadUsesTheSameDevice) {
  TN_REQUIRE_GPU();
  // Communication progress threads allocate, copy and wait from threads of their own.
  std::vector<float> got;
  int thread_device = -1;
  std::string error;
  std::thread worker([&] {
    try {  // an exception escaping a thread would end the test program
      Tensor t = Tensor::full({1000}, 4.0f, gpu());
      got = t.to_vector();
#if TN_HAVE_CUDA
      TN_CUDA_CHECK(cudaGetDevice(&thread_device));
#else
      thread_device = 0;
#endif
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  worker.join();
  EXPECT_EQ(error, "");
  expect_bitwise_equal("from another thread", got, std::vector<float>(1000, 4.0f));
  EXPECT_EQ(thread_device, 0);
}

// A timestamp is a point on the compute stream: the span around queued work covers it, and
// reading it waits for the work, not the other way round.
TEST(GpuRuntime, TimestampsTimeTheQueuedWork) {
  TN_REQUIRE_GPU();
  Tensor big = Tensor::empty({std::int64_t{1} << 26}, DType::F32, gpu());  // 256 MiB
  const DeviceTimestamp start = record_timestamp(gpu());
  for (int i = 0; i < 20; ++i) big.fill(static_cast<float>(i));  // ~5 GiB of writes
  const DeviceTimestamp end = record_timestamp(gpu());
  const double ms = milliseconds_between(start, end);
  EXPECT_GT(ms, 0.5) << "20 fills of 256 MiB";
  EXPECT_LT(ms, 10000.0);
  EXPECT_EQ(big.to_vector().back(), 19.0f);
}

}  // namespace
}  // namespace ternion::test
