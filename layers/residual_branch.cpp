#include "layers/residual_branch.h"

#include "kernels/elementwise.h"

namespace ternion {

Tensor project_onto_residual(RowParallelLinear& proj, Dropout& dropout, const Tensor& x,
                             const Tensor* residual, ActivationContext& ctx) {
  if (residual == nullptr) return dropout.forward(proj.forward(x, ctx), ctx);
  // Dropout still runs: it records for its backward that it left this micro-batch alone.
  if (!dropout.active(ctx)) return dropout.forward(proj.forward(x, ctx, *residual), ctx);
  Tensor out = dropout.forward(proj.forward(x, ctx), ctx);  // a fresh tensor: ours to add to
  accumulate(out, *residual);
  return out;
}

}  // namespace ternion
