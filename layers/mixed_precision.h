// Where parameters live and in which precision layers compute with them.
//
// Models are built and initialised on the CPU (the counter-based RNG fills each shard there,
// identically in every layout), then `place_parameters` moves values and gradients to the
// rank's device. Under bf16 mixed precision (`training.precision: bf16`, Megatron's and
// llm.c's recipe) each parameter also gets a bf16 `compute` copy that the layers use for
// their matmuls, norms and lookups, so activations are bf16; the f32 `value` remains the
// master copy the optimizer updates (with f32 state), and gradients accumulate in f32.
// `refresh_compute_copies` re-rounds the copies after every change of the master values:
// an optimizer step, a ZeRO-1 all-gather, a checkpoint load.
#pragma once

#include <string>
#include <vector>

#include "framework/parameter.h"

namespace ternion {

enum class Precision { F32, BF16 };
// "fp32" or "bf16"; anything else throws ConfigError naming `key`.
Precision parse_precision(const std::string& text, const std::string& key);
const char* precision_name(Precision precision);
DType compute_dtype(Precision precision);

// Moves every parameter's value and gradient to `device` (no-op for those already there).
void place_parameters(const std::vector<Parameter*>& params, Device device);
// Gives every parameter a compute copy in `precision` (bf16), or removes them (f32).
void set_compute_precision(const std::vector<Parameter*>& params, Precision precision);
// Re-rounds each existing compute copy from its master value.
void refresh_compute_copies(const std::vector<Parameter*>& params);

}  // namespace ternion
