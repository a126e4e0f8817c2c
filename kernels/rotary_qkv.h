// Rotary position embedding and grouped-query packing: Llama's one QKV projection, laid out by
// key/value group, turned into the per-head [q|k|v] layout that attention takes.
//
// G = kv_heads (on this rank), r = queries_per_kv, hs = head size (even), H = G r query heads.
//   grouped [B, T, G (r + 2) hs]  per group g: its r queries (heads g r .. g r + r - 1), key g,
//                                 value g, hs columns each. Grouping by key/value group makes a
//                                 tensor-parallel rank's groups one contiguous slice.
//   packed  [B, T, H 3 hs]        attention's layout (kernels/attention.h): for head h = g r + i,
//                                 q = rope(query i of g), k = rope(key g), v = value g
// Keys and values are repeated for each query head of their group (grouped-query attention
// expanded for the multi-head kernel); r = 1 is plain multi-head attention.
// rope turns each head's pairs (i, i + hs/2) at position p = first_position + t
// (kernels/rotary_qkv_math.h, Hugging Face Llama's convention: base theta, Llama 3's scaling).
//
//   forward   packed = as above                                           (overwrites packed)
//   backward  dgrouped: query = rope^T(dq of its head), key = rope^T(sum over the group's r heads
//             of dk), value = sum over the r heads of dv, summed in head order (deterministic)
//                                                                         (overwrites dgrouped)
// Both operands one dtype, F32 or BF16 (math in F32), contiguous, on one device; the output may
// not alias the input. CUDA takes head sizes up to 512.
#pragma once

#include <cstdint>

#include "framework/tensor.h"
#include "kernels/rotary_qkv_math.h"

namespace ternion {

void rotary_qkv_forward(Tensor& packed, const Tensor& grouped, std::int64_t kv_heads,
                        std::int64_t queries_per_kv, std::int64_t first_position,
                        const RotaryParameters& rope);
void rotary_qkv_backward(Tensor& dgrouped, const Tensor& dpacked, std::int64_t kv_heads,
                         std::int64_t queries_per_kv, std::int64_t first_position,
                         const RotaryParameters& rope);

}  // namespace ternion
