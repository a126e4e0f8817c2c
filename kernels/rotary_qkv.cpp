#include "kernels/rotary_qkv.h"

#include <cmath>

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {

// Checks the arguments of either direction, `out` being written from `in`; returns the head size.
std::int64_t check_arguments(const char* op, const Tensor& out, const Tensor& in,
                             const Tensor& grouped, const Tensor& packed, std::int64_t kv_heads,
                             std::int64_t queries_per_kv, std::int64_t first_position,
                             const RotaryParameters& rope) {
  TN_CHECK(in.dtype() == DType::F32 || in.dtype() == DType::BF16, op, ": ", in.str(),
           " is not f32 or bf16");
  for (const Tensor* t : {&out, &in}) {
    TN_CHECK(t->dtype() == in.dtype() && t->is_contiguous(), op, ": needs contiguous ",
             dtype_name(in.dtype()), " tensors, got ", t->str());
    TN_CHECK(t->device() == in.device(), op, ": ", t->str(), " is not on ", in.device().str());
  }
  TN_CHECK(kv_heads > 0 && queries_per_kv > 0, op, ": kv_heads ", kv_heads,
           " and queries_per_kv ", queries_per_kv, " must be positive");
  TN_CHECK(first_position >= 0, op, ": first_position ", first_position, " is negative");
  TN_CHECK(rope.theta > 0 && std::isfinite(rope.theta), op, ": theta ", rope.theta,
           " is not a positive number");
  TN_CHECK(!rope.scaled() || (rope.scaling_factor >= 1 && rope.low_freq_factor > 0 &&
                              rope.high_freq_factor > rope.low_freq_factor &&
                              rope.original_context > 0),
           op, ": rotary scaling factor ", rope.scaling_factor, ", frequency factors ",
           rope.low_freq_factor, " and ", rope.high_freq_factor, ", original context ",
           rope.original_context, " (a factor of at least 1, 0 < low < high, a positive context)");
  TN_CHECK(grouped.dim() == 3 && packed.dim() == 3, op, ": needs [B, T, width] tensors, got ",
           "grouped ", shape_str(grouped.shape()), " and packed ", shape_str(packed.shape()));
  const std::int64_t units = kv_heads * (queries_per_kv + 2);
  TN_CHECK(grouped.size(2) > 0 && grouped.size(2) % units == 0, op, ": grouped width ",
           grouped.size(2), " is not kv_heads ", kv_heads, " x (queries_per_kv ", queries_per_kv,
           " + 2) x head_size");
  const std::int64_t head_size = grouped.size(2) / units;
  TN_CHECK(head_size % 2 == 0, op, ": head size ", head_size,
           " is odd; the rotation turns pairs (i, i + head_size / 2)");
  const Shape want = {grouped.size(0), grouped.size(1), kv_heads * queries_per_kv * 3 * head_size};
  TN_CHECK(packed.shape() == want, op, ": packed ", shape_str(packed.shape()), " should be ",
           shape_str(want), " for grouped ", shape_str(grouped.shape()), " (kv_heads ", kv_heads,
           ", queries_per_kv ", queries_per_kv, ", head size ", head_size, ")");
  TN_CHECK(in.numel() == 0 || !out.same_start_as(in), op,
           ": the output may not alias the input");
  return head_size;
}

}  // namespace

// packed and grouped: one dtype, f32 or bf16 (the bf16 path on the CPU stages through f32).
void rotary_qkv_forward(Tensor& packed, const Tensor& grouped, std::int64_t kv_heads,
                        std::int64_t queries_per_kv, std::int64_t first_position,
                        const RotaryParameters& rope) {
  const char* op = "rotary_qkv_forward";
  const std::int64_t head_size = check_arguments(op, packed, grouped, grouped, packed, kv_heads,
                                                 queries_per_kv, first_position, rope);
  if (counted_on_meta({&grouped, &packed})) return;  // shapes only: nothing to compute
  if (grouped.device().is_cpu()) {
    const Tensor grouped32 = as_f32(grouped);
    F32Output packed32(packed);
    cpu::rotary_qkv_forward<float>(packed32.get().data<float>(), grouped32.data<float>(),
                                   grouped.size(0), grouped.size(1), kv_heads, queries_per_kv,
                                   head_size, first_position, rope);
    packed32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::rotary_qkv_forward(packed, grouped, kv_heads, queries_per_kv, first_position, rope);
#else
    TN_THROW(CudaError, "rotary_qkv_forward: no CUDA kernel in this build");
#endif
  }
}

// dgrouped and dpacked: one dtype, f32 or bf16.
void rotary_qkv_backward(Tensor& dgrouped, const Tensor& dpacked, std::int64_t kv_heads,
                         std::int64_t queries_per_kv, std::int64_t first_position,
                         const RotaryParameters& rope) {
  const char* op = "rotary_qkv_backward";
  const std::int64_t head_size = check_arguments(op, dgrouped, dpacked, dgrouped, dpacked,
                                                 kv_heads, queries_per_kv, first_position, rope);
  if (counted_on_meta({&dpacked, &dgrouped})) return;  // shapes only: nothing to compute
  if (dpacked.device().is_cpu()) {
    const Tensor dpacked32 = as_f32(dpacked);
    F32Output dgrouped32(dgrouped);
    cpu::rotary_qkv_backward<float>(dgrouped32.get().data<float>(), dpacked32.data<float>(),
                                    dgrouped.size(0), dgrouped.size(1), kv_heads, queries_per_kv,
                                    head_size, first_position, rope);
    dgrouped32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::rotary_qkv_backward(dgrouped, dpacked, kv_heads, queries_per_kv, first_position, rope);
#else
    TN_THROW(CudaError, "rotary_qkv_backward: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
