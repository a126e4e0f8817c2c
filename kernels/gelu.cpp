#include "kernels/gelu.h"

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {
void check_same_f32(const char* op, const Tensor& a, const Tensor& b) {
  TN_CHECK(
      a.dtype() == DType::F32 && b.dtype() == DType::F32 && a.is_contiguous() && b.is_contiguous(),
      op, ": needs contiguous f32 tensors, got ", a.str(), " and ", b.str());
  TN_CHECK(a.shape() == b.shape() && a.device() == b.device(), op, ": ", a.str(), " and ", b.str(),
           " differ in shape or device");
}
}  // namespace

void gelu_forward(Tensor& out, const Tensor& x) {
  check_same_f32("gelu_forward", out, x);
  if (x.device().is_cpu()) {
    cpu::gelu_forward<float>(out.data<float>(), x.data<float>(), x.numel());
  } else {
    TN_THROW(CudaError, "gelu_forward: no CUDA kernel in this build");
  }
}

void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dout) {
  check_same_f32("gelu_backward", dx, x);
  check_same_f32("gelu_backward", dout, x);
  if (x.device().is_cpu()) {
    cpu::gelu_backward<float>(dx.data<float>(), x.data<float>(), dout.data<float>(), x.numel());
  } else {
    TN_THROW(CudaError, "gelu_backward: no CUDA kernel in this build");
  }
}

}  // namespace ternion
