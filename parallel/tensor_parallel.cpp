#include "parallel/tensor_parallel.h"

namespace ternion {

namespace {

std::int64_t normalise_dim(const Tensor& x, std::int64_t dim) {
  if (dim < 0) dim += x.dim();
  TN_CHECK(dim >= 0 && dim < x.dim(), "dimension ", dim, " out of range for ", x.str());
  return dim;
}

std::int64_t chunk_extent(const Tensor& x, std::int64_t dim, int parts, const char* what) {
  TN_CHECK(x.size(dim) % parts == 0, what, ": dimension ", dim, " of ", x.str(),
           " does not split over ", parts, " tensor-parallel ranks");
  return x.size(dim) / parts;
}

}  // namespace

void all_reduce_in_place(Tensor& x, const TensorParallel& tp, ReduceOp op) {
  if (!tp.active()) return;
  tp.group->all_reduce(x, op);
}

Tensor all_gather_along(const Tensor& x, std::int64_t dim, const TensorParallel& tp) {
  if (!tp.active()) return x;
  dim = normalise_dim(x, dim);
  const int parts = tp.size();
  const Tensor local = x.contiguous();
  Shape gathered_shape = local.shape();
  gathered_shape.insert(gathered_shape.begin(), parts);  // [parts, ...local]
  Tensor gathered = Tensor::empty(gathered_shape, local.dtype(), local.device());
  tp.group->all_gather(gathered, local);
  Shape out_shape = local.shape();
  const std::int64_t extent = out_shape[dim];
  out_shape[dim] *= parts;
  if (dim == 0) return gathered.view(out_shape);  // the chunks are already in order
  // Interleave the ranks' chunks along `dim`.
  Tensor out = Tensor::empty(out_shape, local.dtype(), local.device());
  for (int r = 0; r < parts; ++r)
    out.slice(dim, r * extent, extent).copy_from(gathered.select(0, r));
  return out;
}

Tensor reduce_scatter_along(const Tensor& x, std::int64_t dim, const TensorParallel& tp) {
  if (!tp.active()) return x;
  dim = normalise_dim(x, dim);
  const int parts = tp.size();
  const std::int64_t extent = chunk_extent(x, dim, parts, "reduce_scatter_along");
  Shape chunk_shape = x.shape();
  chunk_shape[dim] = extent;
  Tensor packed;
  if (dim == 0) {
    packed = x.contiguous();
  } else {
    // Rank r's chunk must be contiguous in the buffer the collective splits: pack them.
    Shape packed_shape = chunk_shape;
    packed_shape.insert(packed_shape.begin(), parts);
    packed = Tensor::empty(packed_shape, x.dtype(), x.device());
    for (int r = 0; r < parts; ++r) packed.select(0, r).copy_from(x.slice(dim, r * extent, extent));
  }
  Tensor out = Tensor::empty(chunk_shape, x.dtype(), x.device());
  tp.group->reduce_scatter(out, packed, ReduceOp::Sum);
  return out;
}

Tensor split_along(const Tensor& x, std::int64_t dim, const TensorParallel& tp) {
  if (!tp.active()) return x;
  dim = normalise_dim(x, dim);
  const std::int64_t extent = chunk_extent(x, dim, tp.size(), "split_along");
  return x.slice(dim, tp.rank() * extent, extent).contiguous();
}

}  // namespace ternion
