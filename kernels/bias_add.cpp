#include "kernels/bias_add.h"

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {
// out [..., C] is N = numel / C rows of the bias's C columns.
void check_bias_operands(const char* op, const Tensor& rows, const Tensor& bias) {
  TN_CHECK(rows.dtype() == DType::F32 && bias.dtype() == DType::F32 && rows.is_contiguous() &&
               bias.is_contiguous(),
           op, ": needs contiguous f32 tensors, got ", rows.str(), " and ", bias.str());
  TN_CHECK(rows.device() == bias.device(), op, ": ", rows.str(), " and ", bias.str(),
           " are on different devices");
  TN_CHECK(rows.dim() >= 1 && bias.dim() == 1 && rows.size(-1) == bias.size(0), op, ": rows ",
           shape_str(rows.shape()), " do not end in the bias's ", shape_str(bias.shape()));
}
}  // namespace

void bias_add_forward(Tensor& out, const Tensor& bias) {
  check_bias_operands("bias_add_forward", out, bias);
  const std::int64_t cols = bias.size(0), rows = cols == 0 ? 0 : out.numel() / cols;
  if (out.device().is_cpu()) {
    cpu::bias_add_forward<float>(out.data<float>(), bias.data<float>(), rows, cols);
  } else {
    TN_THROW(CudaError, "bias_add_forward: no CUDA kernel in this build");
  }
}

void bias_add_backward(Tensor& dbias, const Tensor& dout) {
  check_bias_operands("bias_add_backward", dout, dbias);
  const std::int64_t cols = dbias.size(0), rows = cols == 0 ? 0 : dout.numel() / cols;
  if (dout.device().is_cpu()) {
    cpu::bias_add_backward<float>(dbias.data<float>(), dout.data<float>(), rows, cols);
  } else {
    TN_THROW(CudaError, "bias_add_backward: no CUDA kernel in this build");
  }
}

}  // namespace ternion
