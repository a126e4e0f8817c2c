// Dropout on the GPU: the same Philox mask as the CPU for the same global position, so the
// outputs are bit for bit the CPU's, for F32 and BF16, forward, backward in place, p = 0.
#include <algorithm>

#include "gpu_test_util.h"
#include "kernels/dropout.h"

namespace ternion::test {
namespace {

constexpr std::int64_t kB = 3, kT = 17, kC = 129;
constexpr float kP = 0.2f;
const RngStream kStream = dropout_stream(4321, 11, "block1.mlp.dropout");
// This piece is samples [5, 8) and positions [3, 20) of a global [*, 40, C] tensor.
const GlobalPosition kPosition{5, 3, 40};

void check_dropout(DType dtype, float p) {
  SCOPED_TRACE(std::string(dtype == DType::BF16 ? "bf16" : "f32") + ", p " + std::to_string(p));
  const Tensor x = random_tensor({kB, kT, kC}, 71, 0.5f, 1.5f);  // never 0: zeros are the mask
  Tensor cpu_x = Tensor::empty(x.shape(), dtype), cpu_out = Tensor::empty(x.shape(), dtype);
  convert(cpu_x, x);
  dropout_forward(cpu_out, cpu_x, p, kStream, kPosition);
  const std::vector<float> want = as_f32(cpu_out).to_vector();

  const Tensor gx = to_gpu(x, dtype);
  Tensor out = Tensor::empty(x.shape(), dtype, gpu());
  dropout_forward(out, gx, p, kStream, kPosition);
  const std::vector<float> got = to_host_floats(out);
  expect_bitwise_equal("dropout forward", got, want);
  if (p > 0.0f) {
    const auto dropped = std::count(got.begin(), got.end(), 0.0f);
    EXPECT_GT(dropped, 0) << "nothing dropped at p " << p;
    EXPECT_LT(dropped, static_cast<std::ptrdiff_t>(got.size())) << "everything dropped";
  }

  // Backward in place regenerates the same mask.
  Tensor in_place = to_gpu(x, dtype);
  dropout_backward(in_place, in_place, p, kStream, kPosition);
  expect_bitwise_equal("dropout backward in place", to_host_floats(in_place), want);

  // Another position in the global batch gives another mask (the position is used).
  Tensor elsewhere = Tensor::empty(x.shape(), dtype, gpu());
  dropout_forward(elsewhere, gx, p, kStream, GlobalPosition{6, 3, 40});
  if (p > 0.0f) {
    EXPECT_NE(to_host_floats(elsewhere), got);
  }
}

TEST(GpuDropout, F32MaskIsTheCpuMask) {
  TN_REQUIRE_GPU();
  check_dropout(DType::F32, kP);
}

TEST(GpuDropout, Bf16MaskIsTheCpuMask) {
  TN_REQUIRE_GPU();
  check_dropout(DType::BF16, kP);
}

TEST(GpuDropout, ZeroProbabilityIsAnExactCopy) {
  TN_REQUIRE_GPU();
  check_dropout(DType::F32, 0.0f);
  check_dropout(DType::BF16, 0.0f);
}

}  // namespace
}  // namespace ternion::test
