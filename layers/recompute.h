// Activation recomputation (training.recompute), trading compute for activation memory:
//   none       every layer keeps what its backward needs, from forward to backward
//   selective  the cheap, wide outputs (norms, GELU, SwiGLU) are recomputed in the backward
//              from what their layers keep anyway (ActivationContext::offer_recompute)
//   full       a block keeps only its input; its forward runs again just before its backward.
//              `full_blocks` of each chunk's blocks do so, the first ones (0: all)
// Dropout masks are functions of their keys, so a recomputed forward draws the same masks, and
// the run computes what it computes without recomputation, bit for bit on CPU. GptModel
// (layers/gpt_model.h) applies the policy; docs/architecture.md says what each mode keeps.
#pragma once

#include <cstdint>
#include <string>

namespace ternion {

enum class Recompute { none, selective, full };
struct RecomputePolicy {
  Recompute mode = Recompute::none;
  std::int64_t full_blocks = 0;
};
bool parse_recompute(const std::string& text, Recompute& mode);  // "none", "selective", "full"

}  // namespace ternion

