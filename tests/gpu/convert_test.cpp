// convert on the GPU rounds exactly as the CPU does (bfloat16.h on both sides).
#include "gpu_test_util.h"

namespace ternion::test {
namespace {

TEST(GpuConvert, Bf16RoundTripMatchesCpuBitForBit) {
  TN_REQUIRE_GPU();
  // Values around rounding ties, tiny and huge magnitudes, and the extremes of [-4, 4).
  std::vector<float> values = random_floats(4099, 7, -4.0f, 4.0f);
  values.insert(values.end(), {0.0f, -0.0f, 1.00390625f, 1.01171875f, 3.0e38f, -1.0e-39f});
  const Shape shape{static_cast<std::int64_t>(values.size())};
  const Tensor cpu_in = Tensor::from_vector(values, shape);
  Tensor cpu_bf16 = Tensor::empty(shape, DType::BF16);
  convert(cpu_bf16, cpu_in);

  const Tensor gpu_bf16 = to_gpu(cpu_in, DType::BF16);
  expect_bitwise_equal("bf16(x)", to_host_floats(gpu_bf16), as_f32(cpu_bf16).to_vector());
}

}  // namespace
}  // namespace ternion::test
