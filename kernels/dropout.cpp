#include "kernels/dropout.h"

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {
// in and out [B, T_local, C], equal shapes and dtypes (f32 or bf16); p in [0, 1); the piece
// lies inside the global sequence.
void check_dropout_operands(const char* op, const Tensor& out, const Tensor& in, float p,
                            const GlobalPosition& position) {
  TN_CHECK((in.dtype() == DType::F32 || in.dtype() == DType::BF16) &&
               out.dtype() == in.dtype() && out.is_contiguous() && in.is_contiguous() &&
               out.device() == in.device(),
           op, ": needs contiguous tensors of one dtype (f32 or bf16) on one device, got ",
           out.str(), " and ", in.str());
  TN_CHECK(in.dim() == 3 && out.shape() == in.shape(), op, ": ", shape_str(out.shape()), " and ",
           shape_str(in.shape()), " are not the same [B, T, C]");
  TN_CHECK(p >= 0.0f && p < 1.0f, op, ": p = ", p, " is outside [0, 1)");
  TN_CHECK(position.sample_offset >= 0 && position.seq_offset >= 0 &&
               position.seq_offset + in.size(1) <= position.seq_total,
           op, ": positions [", position.seq_offset, ", ", position.seq_offset + in.size(1),
           ") lie outside the sequence of ", position.seq_total,
           " (GlobalPosition.seq_total must be set)");
}
}  // namespace

void dropout_forward(Tensor& out, const Tensor& x, float p, RngStream stream,
                     const GlobalPosition& position) {
  check_dropout_operands("dropout_forward", out, x, p, position);
  if (counted_on_meta({&x, &out})) return;  // shapes only: nothing to compute
  if (x.device().is_cpu()) {
    const Tensor x32 = as_f32(x);  // bf16 staged (before out, which may alias x, is written)
    F32Output out32(out);
    cpu::dropout_forward<float>(out32.get().data<float>(), x32.data<float>(), p, stream,
                                x.size(0), x.size(1), x.size(2), position.sample_offset,
                                position.seq_offset, position.seq_total);
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::dropout_forward(out, x, p, stream, position);
#else
    TN_THROW(CudaError, "dropout_forward: no CUDA kernel in this build");
#endif
  }
}

void dropout_backward(Tensor& dx, const Tensor& dout, float p, RngStream stream,
                      const GlobalPosition& position) {
  check_dropout_operands("dropout_backward", dx, dout, p, position);
  if (counted_on_meta({&dout, &dx})) return;  // shapes only: nothing to compute
  if (dout.device().is_cpu()) {
    const Tensor dout32 = as_f32(dout);
    F32Output dx32(dx);
    cpu::dropout_backward<float>(dx32.get().data<float>(), dout32.data<float>(), p, stream,
                                 dout.size(0), dout.size(1), dout.size(2), position.sample_offset,
                                 position.seq_offset, position.seq_total);
    dx32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::dropout_backward(dx, dout, p, stream, position);
#else
    TN_THROW(CudaError, "dropout_backward: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
