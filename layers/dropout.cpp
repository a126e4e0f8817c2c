#include "layers/dropout.h"

#include "kernels/dropout.h"

namespace ternion {

GlobalPosition Dropout::position_of(const Tensor& x, const MicroBatchInfo& info) const {
  const std::int64_t local_seq = x.size(1);
  if (tp_.sequence_parallel)
    return {info.sample_offset, tp_.rank() * local_seq, local_seq * tp_.size()};
  return {info.sample_offset, 0, local_seq};
}

Tensor Dropout::forward(const Tensor& input, ActivationContext& ctx) {
  const MicroBatchInfo& info = ctx.info();
  const bool apply = active(ctx);
  ctx.save<Saved>(this).applied = apply;
  if (!apply) return input;
  TN_CHECK(input.dim() == 3, name(), ": dropout expects [batch, seq, C], got ", input.str());
  Tensor out = Tensor::empty(input.shape(), input.dtype(), input.device());
  dropout_forward(out, input, p_, dropout_stream(info.seed, info.step, name()),
                  position_of(input, info));
  return out;
}

Tensor Dropout::backward(const Tensor& grad_output, ActivationContext& ctx) {
  const Saved saved = ctx.take<Saved>(this);
  if (!saved.applied) return grad_output;
  const MicroBatchInfo& info = ctx.info();
  Tensor dx = Tensor::empty(grad_output.shape(), grad_output.dtype(), grad_output.device());
  dropout_backward(dx, grad_output, p_, dropout_stream(info.seed, info.step, name()),
                   position_of(grad_output, info));
  return dx;
}

}  // namespace ternion
