#include "kernels/convert.h"

#include "framework/bfloat16.h"
#include "framework/features.h"
#include "framework/op_cost.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

void convert(Tensor& out, const Tensor& in) {
  TN_CHECK(out.shape() == in.shape() && out.device() == in.device() && out.is_contiguous() &&
               in.is_contiguous(),
           "convert: ", in.str(), " into ", out.str(), " (contiguous, one shape and device)");
  if (out.dtype() == in.dtype()) {
    out.copy_from(in);
    return;
  }
  const bool f32_to_bf16 = out.dtype() == DType::BF16 && in.dtype() == DType::F32;
  const bool bf16_to_f32 = out.dtype() == DType::F32 && in.dtype() == DType::BF16;
  TN_CHECK(f32_to_bf16 || bf16_to_f32, "convert: no conversion from ", in.str(), " to ",
           out.str());
  if (counted_on_meta({&out, &in})) return;  // shapes only: nothing to compute
  if (!out.device().is_cpu()) {
#if TN_HAVE_CUDA
    cuda::convert(out, in);
    return;
#else
    TN_THROW(CudaError, "convert: no CUDA kernel in this build");
#endif
  }
  const std::int64_t n = out.numel();
  if (f32_to_bf16) {
    const float* src = in.data<float>();
    BFloat16* dst = out.data<BFloat16>();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
  } else {
    const BFloat16* src = in.data<BFloat16>();
    float* dst = out.data<float>();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  }
}

void convert_many(std::span<Tensor> outs, std::span<const Tensor> ins) {
  TN_CHECK(outs.size() == ins.size(), "convert_many: ", outs.size(), " outputs for ", ins.size(),
           " inputs");
  bool one_launch = !outs.empty() && outs.front().device().type == DeviceType::CUDA;
  for (std::size_t t = 0; t < outs.size(); ++t) {
    TN_CHECK(outs[t].shape() == ins[t].shape() && outs[t].device() == ins[t].device() &&
                 outs[t].is_contiguous() && ins[t].is_contiguous() &&
                 outs[t].device() == outs.front().device(),
             "convert_many: ", ins[t].str(), " into ", outs[t].str(),
             " (contiguous, one shape, every pair on one device)");
    one_launch = one_launch && outs[t].dtype() == DType::BF16 && ins[t].dtype() == DType::F32;
  }
#if TN_HAVE_CUDA
  if (one_launch) {
    cuda::convert_many_f32_to_bf16(outs, ins);
    return;
  }
#endif
  for (std::size_t t = 0; t < outs.size(); ++t) convert(outs[t], ins[t]);
}

Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor f32 = Tensor::empty(t.shape(), DType::F32, t.device());
  convert(f32, t.contiguous());
  return f32;
}

F32Output::F32Output(Tensor& target, bool load) : target_(target) {
  if (target.dtype() == DType::F32) {
    f32_ = target;
  } else {
    f32_ = load ? as_f32(target) : Tensor::empty(target.shape(), DType::F32, target.device());
  }
}

void F32Output::store() {
  if (!f32_.shares_storage_with(target_)) convert(target_, f32_);
}

}  // namespace ternion
