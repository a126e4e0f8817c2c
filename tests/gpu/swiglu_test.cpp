// SwiGLU on the GPU against the CPU op, forward and backward, F32 to a few ulps (the device's
// fast exp and division) and BF16 to its rounding, on feature counts that take the vector path
// (multiples of 8) and ones that do not, and dgate_up in place of gate_up.
#include "gpu_test_util.h"
#include "kernels/swiglu.h"

namespace ternion::test {
namespace {

struct SwiGluCase {
  std::int64_t rows, features;
};

// 8 features a thread where rows x features is a multiple of 8 (64, 1024, and 21 x 24), one
// otherwise (13, 341); 5000 x 1024 needs more than the grid's 65535 blocks (grid-stride loop).
const SwiGluCase kCases[] = {{21, 13}, {300, 64}, {21, 24}, {37, 341}, {5000, 1024}};

// A CPU tensor of `f32`'s values in `dtype`.
Tensor on_cpu_as(const Tensor& f32, DType dtype) {
  if (dtype == DType::F32) return f32.clone();
  Tensor t = Tensor::empty(f32.shape(), dtype);
  convert(t, f32);
  return t;
}

TEST(GpuSwiGlu, ForwardAndBackwardMatchCpu) {
  TN_REQUIRE_GPU();
  for (const auto& [rows, features] : kCases) {
    const Shape in_shape = {rows, 2 * features}, out_shape = {rows, features};
    const Tensor gate_up = random_tensor(in_shape, 1, -8.0f, 8.0f);
    const Tensor dout = random_tensor(out_shape, 2);
    for (DType dtype : {DType::F32, DType::BF16}) {
      const bool bf16 = dtype == DType::BF16;
      SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + ", rows " + std::to_string(rows) +
                   ", features " + std::to_string(features));
      // F32: __expf and __fdividef, a few ulps (an absolute bound too, where silu'(g) crosses
      // 0 near g = -1.28 by cancellation). BF16: the same F32 math rounded once, so at most one
      // bf16 ulp (at most 2^-7 relative) apart where the F32 values straddle a rounding boundary.
      const double atol = 2e-6, rtol = bf16 ? 1e-2 : 1e-5;
      const Tensor cgate_up = on_cpu_as(gate_up, dtype), cdout = on_cpu_as(dout, dtype);
      Tensor want = Tensor::empty(out_shape, dtype), want_dgu = Tensor::empty(in_shape, dtype);
      swiglu_forward(want, cgate_up);
      swiglu_backward(want_dgu, cdout, cgate_up);

      const Tensor ggate_up = to_gpu(gate_up, dtype), gdout = to_gpu(dout, dtype);
      Tensor out = to_gpu(Tensor::full(out_shape, NAN), dtype);  // every element written
      Tensor dgu = to_gpu(Tensor::full(in_shape, NAN), dtype);
      swiglu_forward(out, ggate_up);
      swiglu_backward(dgu, gdout, ggate_up);
      expect_close("swiglu out", to_host_floats(out), as_f32(want).to_vector(), atol, rtol);
      expect_close("swiglu dgate_up", to_host_floats(dgu), as_f32(want_dgu).to_vector(), atol,
                   rtol);

      Tensor in_place = to_gpu(gate_up, dtype);
      swiglu_backward(in_place, gdout, in_place);
      expect_bitwise_equal("swiglu dgate_up in place", to_host_floats(in_place),
                           to_host_floats(dgu));
    }
  }
}

// A view one element into its storage cannot take 16-byte access: the one-element path on a
// shape that would otherwise take the vector one, with the same values.
TEST(GpuSwiGlu, UnalignedViewsTakeTheScalarPath) {
  TN_REQUIRE_GPU();
  const std::int64_t rows = 32, features = 64;
  const Tensor values = random_tensor({rows * 2 * features + 1}, 3, -8.0f, 8.0f);
  const Tensor dout = random_tensor({rows, features}, 4);
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor unaligned =
        to_gpu(values, dtype).slice(0, 1, rows * 2 * features).view({rows, 2 * features});
    const Tensor aligned = unaligned.clone();
    Tensor out1 = Tensor::empty({rows, features}, dtype, gpu());
    Tensor out8 = Tensor::empty({rows, features}, dtype, gpu());
    swiglu_forward(out1, unaligned);
    swiglu_forward(out8, aligned);
    // The same math per element on either path, though the compiler may contract multiply-adds
    // differently: an f32 ulp or two, or a bf16 ulp where that straddles a rounding boundary.
    const double rtol = dtype == DType::BF16 ? 1e-2 : 1e-6;
    expect_close("swiglu out, one vs eight a thread", to_host_floats(out1), to_host_floats(out8),
                 1e-6, rtol);
    const Tensor gdout = to_gpu(dout, dtype);
    Tensor dgu1 = Tensor::empty({rows, 2 * features}, dtype, gpu());
    Tensor dgu8 = Tensor::empty({rows, 2 * features}, dtype, gpu());
    swiglu_backward(dgu1, gdout, unaligned);
    swiglu_backward(dgu8, gdout, aligned);
    expect_close("swiglu dgate_up, one vs eight a thread", to_host_floats(dgu1),
                 to_host_floats(dgu8), 1e-6, rtol);
  }
}

}  // namespace
}  // namespace ternion::test
