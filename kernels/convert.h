// Precision conversion, and how CPU kernels take BF16 tensors.
//
//   convert(out, in)   out = in in out's dtype (F32 <-> BF16; equal dtypes copy); rounding is
//                      bfloat16.h's round-to-nearest-even on both devices, so CPU and GPU agree
//   convert_many       the same over lists of tensors (one launch on a GPU)
//
// The CPU kernels compute in F32 (and double for the gradient tests). A BF16 tensor reaching a
// CPU op is staged: `as_f32` gives an F32 copy of an input, `F32Output` an F32 stand-in for an
// output that is rounded back into the BF16 tensor when it is stored. Slow, and not how the
// GPU does it, but it makes the mixed-precision path (bf16 activations, fp32 master weights)
// run, and be tested, on CPU ranks.
#pragma once

#include <span>

#include "framework/tensor.h"

namespace ternion {

void convert(Tensor& out, const Tensor& in);
// convert(outs[i], ins[i]) for every i. On a GPU, when every pair is F32 -> BF16 (the
// mixed-precision compute copies after an optimizer step), one launch for all of them.
void convert_many(std::span<Tensor> outs, std::span<const Tensor> ins);

// `t` itself when it is F32, else an F32 copy of it.
Tensor as_f32(const Tensor& t);

// An F32 tensor standing in for `target`: `target` itself when it is F32; otherwise a new
// F32 tensor (holding target's values when `load` is set, for outputs that accumulate) whose
// values `store()` rounds into `target`.
class F32Output {
 public:
  explicit F32Output(Tensor& target, bool load = false);
  Tensor& get() { return f32_; }
  void store();

 private:
  Tensor& target_;
  Tensor f32_;
};

}  // namespace ternion
