#include "kernels/dropout.h"

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {
// in and out [B, T_local, C], equal shapes; p in [0, 1); the piece lies inside the global
// sequence.
void check_dropout_operands(const char* op, const Tensor& out, const Tensor& in, float p,
                            const GlobalPosition& position) {
  TN_CHECK(out.dtype() == DType::F32 && in.dtype() == DType::F32 && out.is_contiguous() &&
               in.is_contiguous() && out.device() == in.device(),
           op, ": needs contiguous f32 tensors on one device, got ", out.str(), " and ", in.str());
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
  if (x.device().is_cpu()) {
    cpu::dropout_forward<float>(out.data<float>(), x.data<float>(), p, stream, x.size(0), x.size(1),
                                x.size(2), position.sample_offset, position.seq_offset,
                                position.seq_total);
  } else {
    TN_THROW(CudaError, "dropout_forward: no CUDA kernel in this build");
  }
}

void dropout_backward(Tensor& dx, const Tensor& dout, float p, RngStream stream,
                      const GlobalPosition& position) {
  check_dropout_operands("dropout_backward", dx, dout, p, position);
  if (dout.device().is_cpu()) {
    cpu::dropout_backward<float>(dx.data<float>(), dout.data<float>(), p, stream, dout.size(0),
                                 dout.size(1), dout.size(2), position.sample_offset,
                                 position.seq_offset, position.seq_total);
  } else {
    TN_THROW(CudaError, "dropout_backward: no CUDA kernel in this build");
  }
}

}  // namespace ternion
