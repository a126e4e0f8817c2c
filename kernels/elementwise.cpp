#include "kernels/elementwise.h"

#include <initializer_list>

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {
// Contiguous f32 or bf16 tensors with the first one's numel and device (shapes may differ).
void check_elementwise(const char* op, std::initializer_list<const Tensor*> all) {
  const Tensor& first = **all.begin();
  for (const Tensor* t : all)
    TN_CHECK((t->dtype() == DType::F32 || t->dtype() == DType::BF16) && t->is_contiguous() &&
                 t->numel() == first.numel() && t->device() == first.device(),
             op, ": needs contiguous f32 or bf16 tensors of equal numel on one device, got ",
             t->str(), " with ", first.str());
}

void check_one_dtype(const char* op, std::initializer_list<const Tensor*> all) {
  const Tensor& first = **all.begin();
  for (const Tensor* t : all)
    TN_CHECK(t->dtype() == first.dtype(), op, ": needs one dtype, got ", t->str(), " with ",
             first.str());
}
}  // namespace

// On the CPU, bf16 tensors are staged through f32 (kernels/convert.h); all-f32 calls pass the
// tensors themselves, without copies.

void add(Tensor& out, const Tensor& a, const Tensor& b) {
  check_elementwise("add", {&out, &a, &b});
  check_one_dtype("add", {&out, &a, &b});
  if (counted_on_meta({&out, &a, &b})) return;  // shapes only: nothing to compute
  if (out.device().is_cpu()) {
    const Tensor a32 = as_f32(a), b32 = as_f32(b);
    F32Output out32(out);
    cpu::add<float>(out32.get().data<float>(), a32.data<float>(), b32.data<float>(), out.numel());
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::add(out, a, b);
#else
    TN_THROW(CudaError, "add: no CUDA kernel in this build");
#endif
  }
}

void accumulate(Tensor& out, const Tensor& x) {
  check_elementwise("accumulate", {&out, &x});
  // One dtype, or f32 out += bf16 x (bf16 gradients into f32 accumulators).
  TN_CHECK(out.dtype() == x.dtype() || out.dtype() == DType::F32, "accumulate: ", out.str(),
           " += ", x.str(), " (one dtype, or f32 += bf16)");
  if (counted_on_meta({&out, &x, &out})) return;  // shapes only: nothing to compute
  if (out.device().is_cpu()) {
    const Tensor x32 = as_f32(x);
    F32Output out32(out, /*load=*/true);
    cpu::accumulate<float>(out32.get().data<float>(), x32.data<float>(), out.numel());
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::accumulate(out, x);
#else
    TN_THROW(CudaError, "accumulate: no CUDA kernel in this build");
#endif
  }
}

void scale(Tensor& x, float factor) {
  check_elementwise("scale", {&x});
  if (counted_on_meta({&x, &x})) return;  // shapes only: nothing to compute
  if (x.device().is_cpu()) {
    F32Output x32(x, /*load=*/true);
    cpu::scale<float>(x32.get().data<float>(), factor, x.numel());
    x32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::scale(x, factor);
#else
    TN_THROW(CudaError, "scale: no CUDA kernel in this build");
#endif
  }
}

double sum_of_squares(const Tensor& x) { return sums_of_squares(std::span(&x, 1)).front(); }

std::vector<double> sums_of_squares(std::span<const Tensor> xs) {
  if (xs.empty()) return {};
  for (const Tensor& x : xs) {
    check_elementwise("sums_of_squares", {&x});
    TN_CHECK(x.device() == xs.front().device(), "sums_of_squares: needs one device, got ",
             x.str(), " with ", xs.front().str());
  }
  if (xs.front().device().is_meta()) {  // shapes only
    for (const Tensor& x : xs) counted_on_meta({&x});
    return std::vector<double>(xs.size(), 0.0);
  }
  if (xs.front().device().is_cpu()) {
    std::vector<double> sums;
    sums.reserve(xs.size());
    for (const Tensor& x : xs) {
      const Tensor x32 = as_f32(x);
      sums.push_back(cpu::sum_of_squares<float>(x32.data<float>(), x.numel()));
    }
    return sums;
  }
#if TN_HAVE_CUDA
  return cuda::sums_of_squares(xs);
#else
  TN_THROW(CudaError, "sums_of_squares: no CUDA kernel in this build");
#endif
}

void zero_many(std::span<Tensor> xs) {
  if (xs.empty()) return;
  for (const Tensor& x : xs) {
    TN_CHECK(x.is_contiguous() && x.device() == xs.front().device(),
             "zero_many: needs contiguous tensors on one device, got ", x.str(), " with ",
             xs.front().str());
  }
  if (xs.front().device().is_meta()) {  // shapes only: nothing to compute
    for (const Tensor& x : xs) counted_on_meta({&x});
    return;
  }
  if (xs.front().device().is_cpu()) {
    for (Tensor& x : xs) x.zero();
    return;
  }
#if TN_HAVE_CUDA
  cuda::zero_many(xs);
#else
  TN_THROW(CudaError, "zero_many: no CUDA kernel in this build");
#endif
}

bool all_finite(const Tensor& x) {
  check_elementwise("all_finite", {&x});
  if (counted_on_meta({&x})) return true;  // shapes only: nothing to compute
  if (x.device().is_cpu()) {
    const Tensor x32 = as_f32(x);
    return cpu::all_finite<float>(x32.data<float>(), x.numel());
  }
#if TN_HAVE_CUDA
  return cuda::all_finite(x);
#else
  TN_THROW(CudaError, "all_finite: no CUDA kernel in this build");
#endif
}

}  // namespace ternion
