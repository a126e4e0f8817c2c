// convert on the GPU rounds exactly as the CPU does (bfloat16.h on both sides); convert_many's
// one launch gives each pair's bits.
#include "gpu_test_util.h"

namespace ternion::test {
namespace {

TEST(GpuConvert, Bf16RoundTripMatchesCpuBitForBit) {
  TN_REQUIRE_GPU();
  // Values around rounding ties, tiny and huge magnitudes, and the extremes of [-4, 4).
  // 4105 values take the one-element path; their first 4096 the vector path.
  std::vector<float> values = random_floats(4099, 7, -4.0f, 4.0f);
  values.insert(values.begin(), {0.0f, -0.0f, 1.00390625f, 1.01171875f, 3.0e38f, -1.0e-39f});
  for (std::size_t count : {values.size(), std::size_t{4096}}) {
    values.resize(count);
    const Shape shape{static_cast<std::int64_t>(values.size())};
    const Tensor cpu_in = Tensor::from_vector(values, shape);
    Tensor cpu_bf16 = Tensor::empty(shape, DType::BF16);
    convert(cpu_bf16, cpu_in);

    const Tensor gpu_bf16 = to_gpu(cpu_in, DType::BF16);
    expect_bitwise_equal("bf16(x), n " + std::to_string(count), to_host_floats(gpu_bf16),
                         as_f32(cpu_bf16).to_vector());
    // And back: bf16 -> f32 on the GPU is exact.
    Tensor back = Tensor::empty(shape, DType::F32, gpu());
    convert(back, gpu_bf16);
    expect_bitwise_equal("f32(bf16(x)), n " + std::to_string(count), to_host_floats(back),
                         as_f32(cpu_bf16).to_vector());
  }
}

TEST(GpuConvert, ManyF32ToBf16IsEachPairConverted) {
  TN_REQUIRE_GPU();
  // Sizes around the 65536-element chunk of the multi-tensor kernel, an empty one among them.
  const std::vector<std::int64_t> sizes = {1, 0, 65535, 65536, 65537, 300001, 7};
  std::vector<Tensor> ins, outs;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    ins.push_back(to_gpu(random_tensor({sizes[t]}, 50 + t, -4.0f, 4.0f)));
    outs.push_back(to_gpu(Tensor::full({sizes[t]}, NAN), DType::BF16));  // every element written
  }
  convert_many(outs, ins);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    Tensor want = Tensor::empty({sizes[t]}, DType::BF16, gpu());
    convert(want, ins[t]);
    expect_bitwise_equal("pair " + std::to_string(t) + " of " + std::to_string(sizes[t]),
                         to_host_floats(outs[t]), to_host_floats(want));
  }
}

}  // namespace
}  // namespace ternion::test
