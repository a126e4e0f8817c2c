#include "kernels/elementwise.h"

#include <initializer_list>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {
// Contiguous f32 tensors with the first one's numel and device (shapes may differ).
void check_elementwise(const char* op, std::initializer_list<const Tensor*> all) {
  const Tensor& first = **all.begin();
  for (const Tensor* t : all)
    TN_CHECK(t->dtype() == DType::F32 && t->is_contiguous() && t->numel() == first.numel() &&
                 t->device() == first.device(),
             op, ": needs contiguous f32 tensors of equal numel on one device, got ", t->str(),
             " with ", first.str());
}
}  // namespace

void add(Tensor& out, const Tensor& a, const Tensor& b) {
  check_elementwise("add", {&out, &a, &b});
  if (out.device().is_cpu()) {
    cpu::add<float>(out.data<float>(), a.data<float>(), b.data<float>(), out.numel());
  } else {
    TN_THROW(CudaError, "add: no CUDA kernel in this build");
  }
}

void accumulate(Tensor& out, const Tensor& x) {
  check_elementwise("accumulate", {&out, &x});
  if (out.device().is_cpu()) {
    cpu::accumulate<float>(out.data<float>(), x.data<float>(), out.numel());
  } else {
    TN_THROW(CudaError, "accumulate: no CUDA kernel in this build");
  }
}

void scale(Tensor& x, float factor) {
  check_elementwise("scale", {&x});
  if (x.device().is_cpu()) {
    cpu::scale<float>(x.data<float>(), factor, x.numel());
  } else {
    TN_THROW(CudaError, "scale: no CUDA kernel in this build");
  }
}

double sum_of_squares(const Tensor& x) {
  check_elementwise("sum_of_squares", {&x});
  if (x.device().is_cpu()) return cpu::sum_of_squares<float>(x.data<float>(), x.numel());
  TN_THROW(CudaError, "sum_of_squares: no CUDA kernel in this build");
}

bool all_finite(const Tensor& x) {
  check_elementwise("all_finite", {&x});
  if (x.device().is_cpu()) return cpu::all_finite<float>(x.data<float>(), x.numel());
  TN_THROW(CudaError, "all_finite: no CUDA kernel in this build");
}

}  // namespace ternion
