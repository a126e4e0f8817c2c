#include "kernels/gelu.h"

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/bias_add.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {
// Contiguous, one float dtype (f32 or bf16), one shape and device.
void check_same_float(const char* op, const Tensor& a, const Tensor& b) {
  TN_CHECK((a.dtype() == DType::F32 || a.dtype() == DType::BF16) && a.dtype() == b.dtype() &&
               a.is_contiguous() && b.is_contiguous(),
           op, ": needs contiguous tensors of one dtype (f32 or bf16), got ", a.str(), " and ",
           b.str());
  TN_CHECK(a.shape() == b.shape() && a.device() == b.device(), op, ": ", a.str(), " and ", b.str(),
           " differ in shape or device");
}
}  // namespace

void gelu_forward(Tensor& out, const Tensor& x) {
  check_same_float("gelu_forward", out, x);
  if (counted_on_meta({&x, &out})) return;  // shapes only: nothing to compute
  if (x.device().is_cpu()) {
    const Tensor x32 = as_f32(x);
    F32Output out32(out);
    cpu::gelu_forward<float>(out32.get().data<float>(), x32.data<float>(), x.numel());
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::gelu_forward(out, x);
#else
    TN_THROW(CudaError, "gelu_forward: no CUDA kernel in this build");
#endif
  }
}

void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dout, Tensor* dbias) {
  check_same_float("gelu_backward", dx, x);
  check_same_float("gelu_backward", dout, x);
  if (dbias != nullptr)
    TN_CHECK(dbias->dtype() == DType::F32 && dbias->is_contiguous() && dbias->dim() == 1 &&
                 x.dim() >= 1 && x.size(-1) == dbias->size(0) && dbias->device() == x.device(),
             "gelu_backward: dbias ", dbias->str(), " for x ", x.str(),
             " (f32, one value per column of x)");
  if (counted_on_meta({&x, &dout, &dx})) return;  // shapes only: nothing to compute
  if (x.numel() == 0) return;
  if (x.device().is_cpu() && dbias != nullptr && dx.dtype() == DType::F32) {
    const std::int64_t cols = x.size(-1);
    cpu::gelu_backward_bias<float>(dx.data<float>(), dbias->data<float>(), x.data<float>(),
                                   dout.data<float>(), x.numel() / cols, cols);
  } else if (x.device().is_cpu()) {  // bf16: the bias gradient sums the rounded dx
    const Tensor x32 = as_f32(x), dout32 = as_f32(dout);
    F32Output dx32(dx);
    cpu::gelu_backward<float>(dx32.get().data<float>(), x32.data<float>(), dout32.data<float>(),
                              x.numel());
    dx32.store();
    if (dbias != nullptr) bias_add_backward(*dbias, dx);
  } else {
#if TN_HAVE_CUDA
    cuda::gelu_backward(dx, x, dout, dbias);
#else
    TN_THROW(CudaError, "gelu_backward: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
