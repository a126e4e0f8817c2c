#include "kernels/adamw.h"

#include <initializer_list>

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/cpu/cpu_kernels.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {
// Parameter, gradient and optimizer state: contiguous f32 of one numel on one device.
void check_optimizer_operands(const char* op, std::initializer_list<const Tensor*> all) {
  const Tensor& param = **all.begin();
  for (const Tensor* t : all)
    TN_CHECK(t->dtype() == DType::F32 && t->is_contiguous() && t->numel() == param.numel() &&
                 t->device() == param.device(),
             op, ": ", t->str(), " does not match the parameter ", param.str(),
             " (contiguous f32, same numel and device)");
}
}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h) {
  check_optimizer_operands("adamw_update", {&param, &grad, &m, &v});
  TN_CHECK(h.step >= 1, "adamw_update: step ", h.step, " is not 1-based");
  if (counted_on_meta({&param, &grad, &m, &v, &param, &m, &v}))
    return;  // shapes only: nothing to compute
  if (param.device().is_cpu()) {
    cpu::adamw_update(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(),
                      param.numel(), h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.grad_scale,
                      h.step);
  } else {
#if TN_HAVE_CUDA
    cuda::adamw_update(param, grad, m, v, h);
#else
    TN_THROW(CudaError, "adamw_update: no CUDA kernel in this build");
#endif
  }
}

void adamw_update_many(std::vector<AdamWTensors>& tensors, const AdamWHyper& h) {
  if (tensors.empty()) return;
  TN_CHECK(h.step >= 1, "adamw_update_many: step ", h.step, " is not 1-based");
  const Device device = tensors.front().param.device();
  for (const AdamWTensors& t : tensors) {
    check_optimizer_operands("adamw_update_many", {&t.param, &t.grad, &t.m, &t.v});
    TN_CHECK(t.param.device() == device, "adamw_update_many: ", t.param.str(), " is not on ",
             device.str(), " with the first tensor");
  }
  if (device.is_meta()) {  // shapes only: nothing to compute
    for (const AdamWTensors& t : tensors)
      counted_on_meta({&t.param, &t.grad, &t.m, &t.v, &t.param, &t.m, &t.v});
    return;
  }
  if (device.is_cpu()) {
    // Exactly adamw_update per tensor, with the tensor's own weight decay.
    for (AdamWTensors& t : tensors)
      cpu::adamw_update(t.param.data<float>(), t.grad.data<float>(), t.m.data<float>(),
                        t.v.data<float>(), t.param.numel(), h.lr, h.beta1, h.beta2, h.eps,
                        t.weight_decay, h.grad_scale, h.step);
  } else {
#if TN_HAVE_CUDA
    cuda::adamw_update_many(tensors, h);
#else
    TN_THROW(CudaError, "adamw_update_many: no CUDA kernel in this build");
#endif
  }
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h) {
  check_optimizer_operands("sgd_update", {&param, &grad, &momentum_buffer});
  if (counted_on_meta({&param, &grad, &momentum_buffer, &param, &momentum_buffer}))
    return;  // shapes only: nothing to compute
  if (param.device().is_cpu()) {
    cpu::sgd_update(param.data<float>(), grad.data<float>(), momentum_buffer.data<float>(),
                    param.numel(), h.lr, h.momentum, h.weight_decay, h.grad_scale);
  } else {
#if TN_HAVE_CUDA
    cuda::sgd_update(param, grad, momentum_buffer, h);
#else
    TN_THROW(CudaError, "sgd_update: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
