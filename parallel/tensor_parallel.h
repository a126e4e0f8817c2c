// Tensor parallelism's communication: the tensor-parallel group a layer shards over, and the
// conjugate mappings (Megatron-LM's f and g, Shoeybi et al. 2019) that layers call around
// their local math. Layers never call the communicator themselves.
//
// Activations are [batch, seq, hidden]. Each mapping is a forward function and the backward
// function that is its conjugate:
//
//   mapping                            forward                    backward
//   copy_to_tensor_region        (f)   identity                   all-reduce (sum)
//   reduce_from_tensor_region    (g)   all-reduce (sum)           identity
//   gather_from_tensor_region          all-gather, last dim       this rank's slice, last dim
//   scatter_to_tensor_region           this rank's slice, last    all-gather, last dim
//   gather_from_sequence_region        all-gather, dim 1 (seq)    reduce-scatter, dim 1
//   reduce_scatter_to_sequence_region  reduce-scatter, dim 1      all-gather, dim 1
//   scatter_to_sequence_region         this rank's slice, dim 1   all-gather, dim 1
//
// With no group (or a group of one rank) every mapping is the identity and communicates
// nothing, so the same layers run on one rank.
#pragma once

#include <cstdint>

#include "framework/tensor.h"
#include "parallel/comm/communicator.h"

namespace ternion {

struct TensorParallel {
  Communicator* group = nullptr;   // the tensor-parallel group; not owned; null = one rank
  bool sequence_parallel = false;  // Megatron's sequence parallelism (see layers/)

  int rank() const { return group != nullptr ? group->rank() : 0; }
  int size() const { return group != nullptr ? group->size() : 1; }
  bool active() const { return size() > 1; }
};

// The primitives, along any dimension (which the group size must divide).
Tensor all_gather_along(const Tensor& x, std::int64_t dim, const TensorParallel& tp);
Tensor reduce_scatter_along(const Tensor& x, std::int64_t dim, const TensorParallel& tp);
Tensor split_along(const Tensor& x, std::int64_t dim, const TensorParallel& tp);
void all_reduce_in_place(Tensor& x, const TensorParallel& tp, ReduceOp op = ReduceOp::Sum);

// f
inline Tensor copy_to_tensor_region(const Tensor& x, const TensorParallel&) { return x; }
inline void copy_to_tensor_region_backward(Tensor& grad, const TensorParallel& tp) {
  all_reduce_in_place(grad, tp);
}
// g
inline void reduce_from_tensor_region(Tensor& x, const TensorParallel& tp) {
  all_reduce_in_place(x, tp);
}
inline Tensor reduce_from_tensor_region_backward(const Tensor& grad, const TensorParallel&) {
  return grad;
}

inline Tensor gather_from_tensor_region(const Tensor& x, const TensorParallel& tp) {
  return all_gather_along(x, -1, tp);
}
inline Tensor gather_from_tensor_region_backward(const Tensor& grad, const TensorParallel& tp) {
  return split_along(grad, -1, tp);
}
inline Tensor scatter_to_tensor_region(const Tensor& x, const TensorParallel& tp) {
  return split_along(x, -1, tp);
}
inline Tensor scatter_to_tensor_region_backward(const Tensor& grad, const TensorParallel& tp) {
  return all_gather_along(grad, -1, tp);
}

inline Tensor gather_from_sequence_region(const Tensor& x, const TensorParallel& tp) {
  return all_gather_along(x, 1, tp);
}
inline Tensor gather_from_sequence_region_backward(const Tensor& grad, const TensorParallel& tp) {
  return reduce_scatter_along(grad, 1, tp);
}
inline Tensor reduce_scatter_to_sequence_region(const Tensor& x, const TensorParallel& tp) {
  return reduce_scatter_along(x, 1, tp);
}
inline Tensor reduce_scatter_to_sequence_region_backward(const Tensor& grad,
                                                         const TensorParallel& tp) {
  return all_gather_along(grad, 1, tp);
}
inline Tensor scatter_to_sequence_region(const Tensor& x, const TensorParallel& tp) {
  return split_along(x, 1, tp);
}
inline Tensor scatter_to_sequence_region_backward(const Tensor& grad, const TensorParallel& tp) {
  return all_gather_along(grad, 1, tp);
}

}  // namespace ternion
