// A named, trainable tensor with its gradient and the facts sharding and optimizers need.
//
// `name` is globally unique and stable ("h.3.attn.qkv.weight"): it keys the initialisation
// RNG, checkpoints and logs. `global_shape` is the unsharded shape; a rank holding a shard
// holds `value = full.slice(shard_dim, shard_offset, value.size(shard_dim))`, and initialises
// exactly that slice of the full parameter, because each element's initial value is a
// function of (seed, name, global element index) alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/tensor.h"

namespace ternion {

enum class ParameterInit { Normal, Zeros, Ones };

struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;  // same shape; parameter gradients accumulate (+=) across micro-batches
  // Under mixed precision, the copy layers compute with: `value` rounded to bf16 after every
  // update (layers/mixed_precision.h). `value` stays the f32 master copy that the optimizer
  // updates, the reducer shards and checkpoints store; `grad` stays f32. Undefined in f32
  // training, where layers compute with `value` itself.
  Tensor compute;
  Shape global_shape;
  std::int64_t shard_dim = -1;  // -1: this rank holds the whole (replicated) parameter
  std::int64_t shard_offset = 0;
  ParameterInit init = ParameterInit::Normal;
  float init_std = 0.02f;
  bool weight_decay = true;  // AdamW decays matrices and embeddings, never biases or norms
  // The gradient this rank accumulates is a partial sum over its tensor-parallel group (a
  // sequence-parallel LayerNorm sees only its share of the tokens): the group's gradients are
  // summed before clipping and the update.
  bool tensor_parallel_partial_grad = false;

  bool is_sharded() const { return shard_dim >= 0; }
  const Tensor& compute_value() const { return compute.defined() ? compute : value; }
};

// A range of one parameter's elements (flattened): what an optimizer updates. Usually the
// whole parameter; under ZeRO this rank's share of it.
struct ParameterSegment {
  Parameter* param = nullptr;
  std::int64_t begin = 0, end = 0;
  // Under ZeRO-2, the segment's reduced gradient ([end - begin]), which lives in the reducer's
  // shard, not in param->grad (which exists only while a backward fills it).
  Tensor reduced_grad;

  Tensor value() const { return param->value.view({-1}).slice(0, begin, end - begin); }
  Tensor grad() const {
    return reduced_grad.defined() ? reduced_grad
                                  : param->grad.view({-1}).slice(0, begin, end - begin);
  }
  std::int64_t numel() const { return end - begin; }
};
std::vector<ParameterSegment> whole_parameters(const std::vector<Parameter*>& params);

// While one lives on this thread, new parameters are shapes without memory
// (Tensor::shape_only): a model built under it costs no memory and says exactly what it would
// hold, which is how a dry run counts each rank's parameters for any block type. Such a model
// can be counted and inspected, not initialised or run.
class ShapeOnlyParameters {
 public:
  ShapeOnlyParameters();
  ~ShapeOnlyParameters();
  ShapeOnlyParameters(const ShapeOnlyParameters&) = delete;
  ShapeOnlyParameters& operator=(const ShapeOnlyParameters&) = delete;
  static bool active();
};

// A whole (unsharded) parameter with a zeroed gradient.
Parameter make_parameter(std::string name, const Shape& shape, ParameterInit init,
                         float init_std, bool weight_decay);
// Part `index` of `parts` equal parts, along `dim`, of a parameter whose whole shape is
// `global_shape` (tensor-parallel shards). parts == 1 gives the whole parameter.
Parameter make_sharded_parameter(std::string name, const Shape& global_shape, std::int64_t dim,
                                 std::int64_t parts, std::int64_t index, ParameterInit init,
                                 float init_std, bool weight_decay);

// Fills `p.value` from the counter-based RNG: element with global index i (row-major in
// global_shape) of a Normal parameter is init_std * philox_normal(parameter_stream(seed,
// name), i).
void initialize_parameter(Parameter& p, std::uint64_t seed);

std::int64_t count_elements(const std::vector<Parameter*>& params);

}  // namespace ternion
