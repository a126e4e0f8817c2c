// Misuse is caught at the Tensor level before any kernel runs: wrong shapes, dtypes and layouts
// throw InternalError naming the shapes; a tensor on a device without kernels in this build
// throws CudaError.
#include <memory>
#include <string>
#include <vector>

#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/layer_norm.h"
#include "kernels/matmul.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

TEST(Misuse, MatmulInnerDimensionMismatch) {
  Tensor a = Tensor::zeros({4, 3}), b = Tensor::zeros({5, 6}), out = Tensor::zeros({4, 6});
  try {
    matmul(out, a, b, false, false);
    FAIL() << "matmul with K 3 vs 5 did not throw";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[5, 6]"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(matmul(out, a, Tensor::zeros({6, 3}), false, true));
}

TEST(Misuse, WrongDtypeLayoutOrShape) {
  Tensor logits = Tensor::zeros({4, 8}), losses = Tensor::empty({4}), lse = Tensor::empty({4});
  EXPECT_THROW(cross_entropy_forward(losses, lse, logits, Tensor::zeros({4}), 8), InternalError)
      << "f32 targets";
  Tensor columns = Tensor::zeros({8, 6}).slice(1, 0, 3);  // a strided view
  Tensor out = Tensor::empty({8, 3});
  EXPECT_THROW(gelu_forward(out, columns), InternalError) << "non-contiguous input";
  Tensor x = Tensor::zeros({5, 4}), mean = Tensor::empty({5}), rstd = Tensor::empty({5});
  Tensor y = Tensor::empty({5, 4});
  EXPECT_THROW(layer_norm_forward(y, mean, rstd, x, Tensor::zeros({5}), Tensor::zeros({5})),
               InternalError)
      << "weight of the wrong width";
}

TEST(Misuse, DeviceWithoutKernelsThrowsCudaError) {
  // Host memory labelled as CUDA memory: enough to reach the dispatch, which must not touch it.
  auto memory = std::make_shared<std::vector<float>>(16, 1.0f);
  Tensor on_gpu = Tensor::wrap(memory->data(), {4, 4}, DType::F32, Device::cuda(0), memory);
  Tensor out = Tensor::wrap(memory->data(), {4, 4}, DType::F32, Device::cuda(0), memory);
  EXPECT_THROW(gelu_forward(out, on_gpu), CudaError);
  EXPECT_THROW(matmul(out, on_gpu, on_gpu, false, false), CudaError);
  EXPECT_THROW(sum_of_squares(on_gpu), CudaError);
  EXPECT_THROW(gelu_forward(out, Tensor::zeros({4, 4})), InternalError) << "mixed devices";
}

}  // namespace
}  // namespace ternion
