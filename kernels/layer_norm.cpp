#include "kernels/layer_norm.h"

#include <initializer_list>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {

// x [..., C] is N = numel / C rows; weight and bias are [C]; mean and rstd hold N values.
struct RowsAndCols {
  std::int64_t rows, cols;
};

RowsAndCols check_layer_norm_operands(const char* op, std::initializer_list<const Tensor*> all,
                                      const Tensor& x, const Tensor& weight, const Tensor& mean,
                                      const Tensor& rstd) {
  for (const Tensor* t : all) {
    TN_CHECK(t->dtype() == DType::F32 && t->is_contiguous(), op,
             ": needs contiguous f32 tensors, got ", t->str());
    TN_CHECK(t->device() == x.device(), op, ": ", t->str(), " is not on x's device ",
             x.device().str());
  }
  TN_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, ": x ", shape_str(x.shape()),
           " has no last dimension to normalise");
  const std::int64_t cols = x.size(-1), rows = x.numel() / cols;
  TN_CHECK(weight.shape() == Shape{cols}, op, ": weight ", shape_str(weight.shape()), " for x ",
           shape_str(x.shape()));
  TN_CHECK(mean.numel() == rows && rstd.numel() == rows, op, ": mean ", shape_str(mean.shape()),
           " and rstd ", shape_str(rstd.shape()), " need ", rows, " values for x ",
           shape_str(x.shape()));
  return {rows, cols};
}

}  // namespace

void layer_norm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, float eps) {
  auto [rows, cols] = check_layer_norm_operands(
      "layer_norm_forward", {&out, &mean, &rstd, &x, &weight, &bias}, x, weight, mean, rstd);
  TN_CHECK(out.shape() == x.shape() && bias.shape() == weight.shape(), "layer_norm_forward: out ",
           shape_str(out.shape()), " and bias ", shape_str(bias.shape()), " for x ",
           shape_str(x.shape()));
  if (x.device().is_cpu()) {
    cpu::layer_norm_forward<float>(out.data<float>(), mean.data<float>(), rstd.data<float>(),
                                   x.data<float>(), weight.data<float>(), bias.data<float>(), rows,
                                   cols, eps);
  } else {
    TN_THROW(CudaError, "layer_norm_forward: no CUDA kernel in this build");
  }
}

void layer_norm_backward(Tensor& dx, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                         const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd) {
  auto [rows, cols] = check_layer_norm_operands(
      "layer_norm_backward", {&dx, &dweight, &dbias, &dout, &x, &weight, &mean, &rstd}, x, weight,
      mean, rstd);
  TN_CHECK(dx.shape() == x.shape() && dout.shape() == x.shape() &&
               dweight.shape() == weight.shape() && dbias.shape() == weight.shape(),
           "layer_norm_backward: dx ", shape_str(dx.shape()), ", dout ", shape_str(dout.shape()),
           ", dweight ", shape_str(dweight.shape()), ", dbias ", shape_str(dbias.shape()),
           " for x ", shape_str(x.shape()));
  if (x.device().is_cpu()) {
    cpu::layer_norm_backward<float>(dx.data<float>(), dweight.data<float>(), dbias.data<float>(),
                                    dout.data<float>(), x.data<float>(), weight.data<float>(),
                                    mean.data<float>(), rstd.data<float>(), rows, cols);
  } else {
    TN_THROW(CudaError, "layer_norm_backward: no CUDA kernel in this build");
  }
}

}  // namespace ternion
