#include "kernels/bias_add.h"

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {
bool is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::BF16; }

// out [..., C] is N = numel / C rows of the bias's C columns.
void check_bias_operands(const char* op, const Tensor& rows, const Tensor& bias) {
  TN_CHECK(is_float(rows.dtype()) && is_float(bias.dtype()) && rows.is_contiguous() &&
               bias.is_contiguous(),
           op, ": needs contiguous f32 or bf16 tensors, got ", rows.str(), " and ", bias.str());
  TN_CHECK(rows.device() == bias.device(), op, ": ", rows.str(), " and ", bias.str(),
           " are on different devices");
  TN_CHECK(rows.dim() >= 1 && bias.dim() == 1 && rows.size(-1) == bias.size(0), op, ": rows ",
           shape_str(rows.shape()), " do not end in the bias's ", shape_str(bias.shape()));
}
}  // namespace

void bias_add_forward(Tensor& out, const Tensor& bias) {
  check_bias_operands("bias_add_forward", out, bias);
  TN_CHECK(out.dtype() == bias.dtype(), "bias_add_forward: out ", out.str(), " and bias ",
           bias.str(), " differ in dtype");
  const std::int64_t cols = bias.size(0), rows = cols == 0 ? 0 : out.numel() / cols;
  if (counted_on_meta({&out, &bias, &out})) return;  // shapes only: nothing to compute
  if (out.device().is_cpu()) {
    const Tensor bias32 = as_f32(bias);
    F32Output out32(out, /*load=*/true);
    cpu::bias_add_forward<float>(out32.get().data<float>(), bias32.data<float>(), rows, cols);
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::bias_add_forward(out, bias);
#else
    TN_THROW(CudaError, "bias_add_forward: no CUDA kernel in this build");
#endif
  }
}

void bias_add_backward(Tensor& dbias, const Tensor& dout) {
  check_bias_operands("bias_add_backward", dout, dbias);
  TN_CHECK(dbias.dtype() == DType::F32, "bias_add_backward: dbias ", dbias.str(),
           " must be f32 (gradients accumulate in f32)");
  const std::int64_t cols = dbias.size(0), rows = cols == 0 ? 0 : dout.numel() / cols;
  if (counted_on_meta({&dout, &dbias, &dbias})) return;  // shapes only: nothing to compute
  if (dout.device().is_cpu()) {
    const Tensor dout32 = as_f32(dout);
    cpu::bias_add_backward<float>(dbias.data<float>(), dout32.data<float>(), rows, cols);
  } else {
#if TN_HAVE_CUDA
    cuda::bias_add_backward(dbias, dout);
#else
    TN_THROW(CudaError, "bias_add_backward: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
