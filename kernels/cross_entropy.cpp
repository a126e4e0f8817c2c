#include "kernels/cross_entropy.h"

#include <initializer_list>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {

// logits [N, V_padded] with 0 < vocab_size <= V_padded; targets i32 and per-row tensors of N.
void check_cross_entropy_operands(const char* op, std::initializer_list<const Tensor*> rows_of_n,
                                  const Tensor& logits, const Tensor& targets,
                                  std::int64_t vocab_size) {
  TN_CHECK(logits.dtype() == DType::F32 && logits.is_contiguous() && logits.dim() == 2, op,
           ": logits must be contiguous 2-D f32, got ", logits.str());
  TN_CHECK(vocab_size > 0 && vocab_size <= logits.size(1), op, ": vocab_size ", vocab_size,
           " for logits ", shape_str(logits.shape()));
  TN_CHECK(targets.dtype() == DType::I32 && targets.is_contiguous() &&
               targets.numel() == logits.size(0) && targets.device() == logits.device(),
           op, ": targets ", targets.str(), " are not i32 with one per row of logits ",
           logits.str());
  for (const Tensor* t : rows_of_n)
    TN_CHECK(t->dtype() == DType::F32 && t->is_contiguous() && t->numel() == logits.size(0) &&
                 t->device() == logits.device(),
             op, ": ", t->str(), " is not contiguous f32 with one value per row of logits ",
             logits.str());
}

}  // namespace

void cross_entropy_forward(Tensor& losses, Tensor& lse, const Tensor& logits, const Tensor& targets,
                           std::int64_t vocab_size, std::int32_t ignore_index) {
  check_cross_entropy_operands("cross_entropy_forward", {&losses, &lse}, logits, targets,
                               vocab_size);
  if (logits.device().is_cpu()) {
    cpu::cross_entropy_forward<float>(losses.data<float>(), lse.data<float>(), logits.data<float>(),
                                      targets.data<std::int32_t>(), logits.size(0), logits.size(1),
                                      vocab_size, ignore_index);
  } else {
    TN_THROW(CudaError, "cross_entropy_forward: no CUDA kernel in this build");
  }
}

void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, float dloss, std::int64_t vocab_size,
                            std::int32_t ignore_index) {
  check_cross_entropy_operands("cross_entropy_backward", {&lse}, logits, targets, vocab_size);
  TN_CHECK(dlogits.dtype() == DType::F32 && dlogits.is_contiguous() &&
               dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
           "cross_entropy_backward: dlogits ", dlogits.str(), " for logits ", logits.str());
  if (logits.device().is_cpu()) {
    cpu::cross_entropy_backward<float>(dlogits.data<float>(), logits.data<float>(),
                                       lse.data<float>(), targets.data<std::int32_t>(), dloss,
                                       logits.size(0), logits.size(1), vocab_size, ignore_index);
  } else {
    TN_THROW(CudaError, "cross_entropy_backward: no CUDA kernel in this build");
  }
}

}  // namespace ternion
