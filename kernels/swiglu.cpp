#include "kernels/swiglu.h"

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

// Every tensor contiguous, in gate_up's dtype (F32 or BF16) and on its device; gate_up
// [..., 2F] and `half` (out or dout) [..., F]. Returns half's numel, rows x F.
std::int64_t check_swiglu_operands(const char* op, const Tensor& gate_up,
                                   std::initializer_list<const Tensor*> others,
                                   const Tensor& half) {
  TN_CHECK(gate_up.dtype() == DType::F32 || gate_up.dtype() == DType::BF16, op,
           ": gate_up must be f32 or bf16, got ", gate_up.str());
  for (const Tensor* t : others) {
    TN_CHECK(t->is_contiguous(), op, ": needs contiguous tensors, got ", t->str());
    TN_CHECK(t->dtype() == gate_up.dtype() && t->device() == gate_up.device(), op, ": ",
             t->str(), " is not in gate_up's dtype and on its device (", gate_up.str(), ")");
  }
  TN_CHECK(gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0, op, ": gate_up ",
           shape_str(gate_up.shape()), " needs an even last dimension (gate, up pairs)");
  Shape half_shape = gate_up.shape();
  half_shape.back() /= 2;
  TN_CHECK(half.shape() == half_shape, op, ": ", half.str(), " for gate_up ",
           shape_str(gate_up.shape()), " must be ", shape_str(half_shape));
  return half.numel();
}

}  // namespace

void swiglu_forward(Tensor& out, const Tensor& gate_up) {
  const std::int64_t n = check_swiglu_operands("swiglu_forward", gate_up, {&gate_up, &out}, out);
  TN_CHECK(n == 0 || !out.same_start_as(gate_up), "swiglu_forward: out ", out.str(),
           " may not alias gate_up");
  if (counted_on_meta({&gate_up, &out})) return;  // shapes only: nothing to compute
  if (gate_up.device().is_cpu()) {
    const Tensor gate_up32 = as_f32(gate_up);
    F32Output out32(out);
    cpu::swiglu_forward<float>(out32.get().data<float>(), gate_up32.data<float>(), n);
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::swiglu_forward(out, gate_up);
#else
    TN_THROW(CudaError, "swiglu_forward: no CUDA kernel in this build");
#endif
  }
}

void swiglu_backward(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up) {
  const std::int64_t n = check_swiglu_operands("swiglu_backward", gate_up,
                                               {&gate_up, &dgate_up, &dout}, dout);
  TN_CHECK(dgate_up.shape() == gate_up.shape(), "swiglu_backward: dgate_up ", dgate_up.str(),
           " for gate_up ", gate_up.str());
  TN_CHECK(n == 0 || !dgate_up.same_start_as(dout), "swiglu_backward: dgate_up ",
           dgate_up.str(), " may not alias dout");
  if (counted_on_meta({&gate_up, &dout, &dgate_up})) return;  // shapes only: nothing to compute
  if (gate_up.device().is_cpu()) {
    const Tensor dout32 = as_f32(dout), gate_up32 = as_f32(gate_up);
    F32Output dgate_up32(dgate_up);  // overwritten: nothing to load
    cpu::swiglu_backward<float>(dgate_up32.get().data<float>(), dout32.data<float>(),
                                gate_up32.data<float>(), n);
    dgate_up32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::swiglu_backward(dgate_up, dout, gate_up);
#else
    TN_THROW(CudaError, "swiglu_backward: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
