// Kernels on the meta device check their arguments as on any device and compute nothing.
#include <gtest/gtest.h>

#include "kernels/elementwise.h"
#include "kernels/linear.h"

namespace ternion {
namespace {

TEST(MetaDevice, KernelsCheckTheirArgumentsAndComputeNothing) {
  const Device meta = Device::meta();
  Tensor x = Tensor::empty({8, 16}, DType::F32, meta), w = Tensor::empty({4, 16}, DType::F32, meta);
  Tensor out = Tensor::empty({8, 4}, DType::F32, meta);
  linear_forward(out, nullptr, x, w, nullptr, LinearActivation::none, nullptr);
  EXPECT_EQ(sums_of_squares(std::vector<Tensor>{x, w}), (std::vector<double>{0.0, 0.0}));
  EXPECT_TRUE(all_finite(x));
  Tensor wrong = Tensor::empty({8, 5}, DType::F32, meta);
  EXPECT_THROW(linear_forward(wrong, nullptr, x, w, nullptr, LinearActivation::none, nullptr),
               Error);
}

}  // namespace
}  // namespace ternion
