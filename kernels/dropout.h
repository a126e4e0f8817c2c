// Inverted dropout with masks from the counter-based RNG (framework/philox.h): no mask is
// stored, backward regenerates it.
//
// x is [B, T_local, C], a piece of a global [B_global, T_global, C] tensor starting at sample
// `position.sample_offset` and sequence position `position.seq_offset`. Element (b, t, c) has
// global index i = ((sample_offset + b) * seq_total + seq_offset + t) * C + c and is kept when
// the 16-bit half (i % 128) / 16 of philox_bits(stream, 16 (i / 128) + i % 16) is at least
// p * 65536 rounded (kernels/dropout_math.h: one Philox call serves eight elements; p has a
// resolution of 1/65536), then scaled by the inverse of the probability of keeping it. So the
// mask does not depend on how the global batch is split over micro-batches, data ranks or
// sequence shards.
//   forward   out = mask * x * scale      (out may alias x)
//   backward  dx  = mask * dout * scale   (overwrites dx; dx may alias dout)
#pragma once

#include <cstdint>

#include "framework/philox.h"
#include "framework/tensor.h"

namespace ternion {

struct GlobalPosition {
  std::int64_t sample_offset = 0;  // index in the global batch of this tensor's first sample
  std::int64_t seq_offset = 0;     // position in the sequence of this tensor's first token
  std::int64_t seq_total = 0;      // full sequence length (T_global)
};

void dropout_forward(Tensor& out, const Tensor& x, float p, RngStream stream,
                     const GlobalPosition& position);
void dropout_backward(Tensor& dx, const Tensor& dout, float p, RngStream stream,
                      const GlobalPosition& position);

}  // namespace ternion
