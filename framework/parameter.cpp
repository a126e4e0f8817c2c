#include "framework/parameter.h"

#include "framework/philox.h"

namespace ternion {

namespace {
thread_local int shape_only_depth = 0;
}  // namespace

ShapeOnlyParameters::ShapeOnlyParameters() { ++shape_only_depth; }
ShapeOnlyParameters::~ShapeOnlyParameters() { --shape_only_depth; }
bool ShapeOnlyParameters::active() { return shape_only_depth > 0; }

Parameter make_parameter(std::string name, const Shape& shape, ParameterInit init,
                         float init_std, bool weight_decay) {
  Parameter p;
  p.name = std::move(name);
  const bool shape_only = ShapeOnlyParameters::active();
  p.value = shape_only ? Tensor::shape_only(shape) : Tensor::empty(shape);
  p.grad = shape_only ? Tensor::shape_only(shape) : Tensor::zeros(shape);
  p.global_shape = shape;
  p.init = init;
  p.init_std = init_std;
  p.weight_decay = weight_decay;
  return p;
}

Parameter make_sharded_parameter(std::string name, const Shape& global_shape, std::int64_t dim,
                                 std::int64_t parts, std::int64_t index, ParameterInit init,
                                 float init_std, bool weight_decay) {
  if (parts == 1)
    return make_parameter(std::move(name), global_shape, init, init_std, weight_decay);
  const auto d = static_cast<std::size_t>(dim);
  TN_CHECK(dim >= 0 && d < global_shape.size() && global_shape[d] % parts == 0 && index >= 0 &&
               index < parts,
           "parameter ", name, " ", shape_str(global_shape), " does not split in ", parts,
           " along dimension ", dim);
  Shape local = global_shape;
  local[d] /= parts;
  Parameter p = make_parameter(std::move(name), local, init, init_std, weight_decay);
  p.global_shape = global_shape;
  p.shard_dim = dim;
  p.shard_offset = index * local[d];
  return p;
}

void initialize_parameter(Parameter& p, std::uint64_t seed) {
  if (p.init != ParameterInit::Normal) {
    p.value.fill(p.init == ParameterInit::Ones ? 1.0f : 0.0f);
    return;
  }
  const RngStream stream = parameter_stream(seed, p.name);
  const Shape& local = p.value.shape();
  const Shape global_strides = contiguous_strides(p.global_shape);
  float* out = p.value.data<float>();
  const std::int64_t n = p.value.numel();
  const auto rank = static_cast<std::int64_t>(local.size());
  // Walk the local elements in row-major order, mapping each to its global index.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i, global = 0;
    for (std::int64_t d = rank - 1; d >= 0; --d) {
      std::int64_t coord = rest % local[d];
      rest /= local[d];
      if (d == p.shard_dim) coord += p.shard_offset;
      global += coord * global_strides[d];
    }
    out[i] = p.init_std * philox_normal(stream, static_cast<std::uint64_t>(global));
  }
}

std::vector<ParameterSegment> whole_parameters(const std::vector<Parameter*>& params) {
  std::vector<ParameterSegment> segments;
  for (Parameter* p : params) segments.push_back({p, 0, p->value.numel(), Tensor()});
  return segments;
}

std::int64_t count_elements(const std::vector<Parameter*>& params) {
  std::int64_t n = 0;
  for (const Parameter* p : params) n += p->value.numel();
  return n;
}

}  // namespace ternion
