#include "kernels/rms_norm.h"

#include <initializer_list>

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/elementwise.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {

// x [..., C] is N = numel / C rows; weight is [C]; rstd holds N values.
struct RowsAndCols {
  std::int64_t rows, cols;
};

// Every tensor contiguous on x's device; x's dtype F32 or BF16, `like_x` in that dtype (x,
// out, dout, dx, weight) and `f32` in F32 (rstd, dweight).
RowsAndCols check_rms_norm_operands(const char* op, std::initializer_list<const Tensor*> like_x,
                                    std::initializer_list<const Tensor*> f32, const Tensor& x,
                                    const Tensor& weight, const Tensor& rstd) {
  TN_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::BF16, op, ": x must be f32 or bf16, got ",
           x.str());
  for (std::initializer_list<const Tensor*> group : {like_x, f32}) {
    for (const Tensor* t : group) {
      TN_CHECK(t->is_contiguous(), op, ": needs contiguous tensors, got ", t->str());
      TN_CHECK(t->device() == x.device(), op, ": ", t->str(), " is not on x's device ",
               x.device().str());
    }
  }
  for (const Tensor* t : like_x)
    TN_CHECK(t->dtype() == x.dtype(), op, ": ", t->str(), " is not in x's dtype ",
             dtype_name(x.dtype()));
  for (const Tensor* t : f32)
    TN_CHECK(t->dtype() == DType::F32, op, ": rstd and the weight gradient are f32, got ",
             t->str());
  TN_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, ": x ", shape_str(x.shape()),
           " has no last dimension to normalise");
  const std::int64_t cols = x.size(-1), rows = x.numel() / cols;
  TN_CHECK(weight.shape() == Shape{cols}, op, ": weight ", shape_str(weight.shape()), " for x ",
           shape_str(x.shape()));
  TN_CHECK(rstd.numel() == rows, op, ": rstd ", shape_str(rstd.shape()), " needs ", rows,
           " values for x ", shape_str(x.shape()));
  return {rows, cols};
}

}  // namespace

void rms_norm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& weight,
                      float eps) {
  auto [rows, cols] =
      check_rms_norm_operands("rms_norm_forward", {&out, &x, &weight}, {&rstd}, x, weight, rstd);
  TN_CHECK(out.shape() == x.shape(), "rms_norm_forward: out ", shape_str(out.shape()), " for x ",
           shape_str(x.shape()));
  if (counted_on_meta({&x, &out, &weight})) return;  // shapes only: nothing to compute
  if (x.device().is_cpu()) {
    // BF16 operands are staged through F32 copies; F32 ones are used as they are.
    const Tensor x32 = as_f32(x), weight32 = as_f32(weight);
    F32Output out32(out);
    cpu::rms_norm_forward<float>(out32.get().data<float>(), rstd.data<float>(), x32.data<float>(),
                                 weight32.data<float>(), rows, cols, eps);
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::rms_norm_forward(out, rstd, x, weight, eps);
#else
    TN_THROW(CudaError, "rms_norm_forward: no CUDA kernel in this build");
#endif
  }
}

void rms_norm_backward(Tensor& dx, Tensor& dweight, const Tensor& dout, const Tensor& x,
                       const Tensor& weight, const Tensor& rstd, const Tensor* residual) {
  auto [rows, cols] = check_rms_norm_operands("rms_norm_backward", {&dx, &dout, &x, &weight},
                                              {&dweight, &rstd}, x, weight, rstd);
  TN_CHECK(dx.shape() == x.shape() && dout.shape() == x.shape() &&
               dweight.shape() == weight.shape(),
           "rms_norm_backward: dx ", shape_str(dx.shape()), ", dout ", shape_str(dout.shape()),
           ", dweight ", shape_str(dweight.shape()), " for x ", shape_str(x.shape()));
  if (residual != nullptr)
    TN_CHECK(residual->shape() == x.shape() && residual->dtype() == x.dtype() &&
                 residual->is_contiguous() && residual->device() == x.device() &&
                 !residual->same_start_as(dx),
             "rms_norm_backward: residual ", residual->str(), " for x ", x.str(),
             " (it must not be dx itself)");
  if (x.device().is_meta()) {  // shapes only: nothing to compute
    counted_on_meta({&x, &dout, &dx, &rstd, &weight, &dweight, &dweight});
    if (residual != nullptr) counted_on_meta({residual});
    return;
  }  // shapes only: nothing to compute
  if (x.device().is_cpu()) {
    const Tensor dout32 = as_f32(dout), x32 = as_f32(x), weight32 = as_f32(weight);
    F32Output dx32(dx);  // overwritten: nothing to load (dx may alias dout, staged above)
    cpu::rms_norm_backward<float>(dx32.get().data<float>(), dweight.data<float>(),
                                  dout32.data<float>(), x32.data<float>(), weight32.data<float>(),
                                  rstd.data<float>(), rows, cols);
    dx32.store();
    if (residual != nullptr) accumulate(dx, *residual);
  } else {
#if TN_HAVE_CUDA
    cuda::rms_norm_backward(dx, dweight, dout, x, weight, rstd, residual);
#else
    TN_THROW(CudaError, "rms_norm_backward: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
