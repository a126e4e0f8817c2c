// The end of a transformer block's branch (attention or MLP): the output projection, dropout,
// and the residual stream the branch joins, residual + dropout(proj(x)).
//
// Without active dropout (p = 0, or evaluation) the projection's GEMM adds the residual
// (RowParallelLinear's forward with a residual: on CUDA cuBLASLt's C matrix, no separate pass);
// with it the dropout's output gets the residual added after. On the CPU either way gives the
// bits of add(sum, residual, dropout(proj(x))). The backward is the branch's own: the residual's
// gradient is the block's (it passes the sum's gradient to both).
#pragma once

#include "layers/dropout.h"
#include "layers/linear.h"

namespace ternion {

// residual null: dropout(proj(x)) alone.
Tensor project_onto_residual(RowParallelLinear& proj, Dropout& dropout, const Tensor& x,
                             const Tensor* residual, ActivationContext& ctx);

}  // namespace ternion
