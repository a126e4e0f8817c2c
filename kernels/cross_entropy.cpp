#include "kernels/cross_entropy.h"

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

// Each tensor in rows_of_n contiguous f32 with one value per row, on `device`.
void check_per_row(const char* op, std::initializer_list<const Tensor*> rows_of_n,
                   std::int64_t rows, Device device) {
  for (const Tensor* t : rows_of_n)
    TN_CHECK(t->dtype() == DType::F32 && t->is_contiguous() && t->numel() == rows &&
                 t->device() == device,
             op, ": ", t->str(), " is not contiguous f32 with one value per row of ", rows,
             " rows on ", device.str());
}

void check_targets(const char* op, const Tensor& targets, std::int64_t rows, Device device) {
  TN_CHECK(targets.dtype() == DType::I32 && targets.is_contiguous() && targets.numel() == rows &&
               targets.device() == device,
           op, ": targets ", targets.str(), " are not i32 with one per row of ", rows, " rows on ",
           device.str());
}

// logits [N, V_local] (f32 or bf16) holding global columns from vocab_start, of a vocabulary of
// vocab_size.
void check_shard_logits(const char* op, const Tensor& logits, std::int64_t vocab_start,
                        std::int64_t vocab_size) {
  TN_CHECK((logits.dtype() == DType::F32 || logits.dtype() == DType::BF16) &&
               logits.is_contiguous() && logits.dim() == 2,
           op, ": logits must be contiguous 2-D f32 or bf16, got ", logits.str());
  TN_CHECK(vocab_size > 0 && vocab_start >= 0, op, ": vocab_size ", vocab_size, ", vocab_start ",
           vocab_start, " for logits ", shape_str(logits.shape()));
}

// The forward over the whole vocabulary: logits [N, V_padded] with vocab_size <= V_padded.
void check_whole_vocabulary(const char* op, const Tensor& losses, const Tensor& lse,
                            const Tensor& logits, const Tensor& targets,
                            std::int64_t vocab_size) {
  check_shard_logits(op, logits, 0, vocab_size);
  TN_CHECK(vocab_size <= logits.size(1), op, ": vocab_size ", vocab_size,
           " is more than the columns of logits ", shape_str(logits.shape()));
  check_targets(op, targets, logits.size(0), logits.device());
  check_per_row(op, {&losses, &lse}, logits.size(0), logits.device());
}

}  // namespace

void cross_entropy_forward(Tensor& losses, Tensor& lse, const Tensor& logits, const Tensor& targets,
                           std::int64_t vocab_size, std::int32_t ignore_index) {
  const char* op = "cross_entropy_forward";
  check_whole_vocabulary(op, losses, lse, logits, targets, vocab_size);
  if (counted_on_meta({&logits, &targets, &losses, &lse}))
    return;  // shapes only: nothing to compute
  if (logits.device().is_cpu()) {
    const Tensor logits32 = as_f32(logits);  // bf16 logits staged; f32 ones used as they are
    cpu::cross_entropy_forward<float>(losses.data<float>(), lse.data<float>(),
                                      logits32.data<float>(), targets.data<std::int32_t>(),
                                      logits.size(0), logits.size(1), vocab_size, ignore_index);
  } else {
#if TN_HAVE_CUDA
    cuda::cross_entropy_forward(losses, lse, logits, targets, vocab_size, ignore_index);
#else
    TN_THROW(CudaError, "cross_entropy_forward: no CUDA kernel in this build");
#endif
  }
}

void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, float dloss, std::int64_t vocab_size,
                            std::int32_t ignore_index, std::int64_t vocab_start) {
  const char* op = "cross_entropy_backward";
  check_shard_logits(op, logits, vocab_start, vocab_size);
  check_targets(op, targets, logits.size(0), logits.device());
  check_per_row(op, {&lse}, logits.size(0), logits.device());
  TN_CHECK(dlogits.dtype() == logits.dtype() && dlogits.is_contiguous() &&
               dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
           op, ": dlogits ", dlogits.str(), " for logits ", logits.str());
  if (counted_on_meta({&logits, &dlogits, &lse, &targets}))
    return;  // shapes only: nothing to compute
  if (logits.device().is_cpu()) {
    // With bf16, logits are copied before dlogits (which may alias them) is written.
    const Tensor logits32 = as_f32(logits);
    F32Output dlogits32(dlogits);
    cpu::cross_entropy_backward<float>(dlogits32.get().data<float>(), logits32.data<float>(),
                                       lse.data<float>(), targets.data<std::int32_t>(), dloss,
                                       logits.size(0), logits.size(1), vocab_start, vocab_size,
                                       ignore_index);
    dlogits32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::cross_entropy_backward(dlogits, logits, lse, targets, dloss, vocab_size, ignore_index,
                                 vocab_start);
#else
    TN_THROW(CudaError, "cross_entropy_backward: no CUDA kernel in this build");
#endif
  }
}

void cross_entropy_forward_backward(Tensor& losses, Tensor& lse, Tensor& dlogits,
                                    const Tensor& logits, const Tensor& targets, float dloss,
                                    std::int64_t vocab_size, std::int32_t ignore_index) {
  const char* op = "cross_entropy_forward_backward";
  check_whole_vocabulary(op, losses, lse, logits, targets, vocab_size);
  TN_CHECK(dlogits.dtype() == logits.dtype() && dlogits.is_contiguous() &&
               dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
           op, ": dlogits ", dlogits.str(), " for logits ", logits.str());
  if (counted_on_meta({&logits, &dlogits, &losses, &lse, &targets}))
    return;  // shapes only: nothing to compute
  if (logits.device().is_cpu()) {
    // With bf16, logits are copied before dlogits (which may alias them) is written.
    const Tensor logits32 = as_f32(logits);
    F32Output dlogits32(dlogits);
    cpu::cross_entropy_forward_backward<float>(
        losses.data<float>(), lse.data<float>(), dlogits32.get().data<float>(),
        logits32.data<float>(), targets.data<std::int32_t>(), dloss, logits.size(0),
        logits.size(1), vocab_size, ignore_index);
    dlogits32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::cross_entropy_forward_backward(losses, lse, dlogits, logits, targets, dloss,
                                         vocab_size, ignore_index);
#else
    TN_THROW(CudaError, "cross_entropy_forward_backward: no CUDA kernel in this build");
#endif
  }
}

void cross_entropy_row_max(Tensor& row_max, const Tensor& logits, std::int64_t vocab_start,
                           std::int64_t vocab_size) {
  const char* op = "cross_entropy_row_max";
  check_shard_logits(op, logits, vocab_start, vocab_size);
  check_per_row(op, {&row_max}, logits.size(0), logits.device());
  if (counted_on_meta({&logits, &row_max})) return;  // shapes only: nothing to compute
  if (logits.device().is_cpu()) {
    const Tensor logits32 = as_f32(logits);
    cpu::cross_entropy_row_max<float>(row_max.data<float>(), logits32.data<float>(),
                                      logits.size(0), logits.size(1), vocab_start, vocab_size);
  } else {
#if TN_HAVE_CUDA
    cuda::cross_entropy_row_max(row_max, logits, vocab_start, vocab_size);
#else
    TN_THROW(CudaError, "cross_entropy_row_max: no CUDA kernel in this build");
#endif
  }
}

void cross_entropy_row_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& global_max,
                               std::int64_t vocab_start, std::int64_t vocab_size) {
  const char* op = "cross_entropy_row_sum_exp";
  check_shard_logits(op, logits, vocab_start, vocab_size);
  check_per_row(op, {&sum_exp, &global_max}, logits.size(0), logits.device());
  if (counted_on_meta({&logits, &sum_exp})) return;  // shapes only: nothing to compute
  if (logits.device().is_cpu()) {
    const Tensor logits32 = as_f32(logits);
    cpu::cross_entropy_row_sum_exp<float>(sum_exp.data<float>(), logits32.data<float>(),
                                          global_max.data<float>(), logits.size(0),
                                          logits.size(1), vocab_start, vocab_size);
  } else {
#if TN_HAVE_CUDA
    cuda::cross_entropy_row_sum_exp(sum_exp, logits, global_max, vocab_start, vocab_size);
#else
    TN_THROW(CudaError, "cross_entropy_row_sum_exp: no CUDA kernel in this build");
#endif
  }
}

void cross_entropy_target_logit(Tensor& target_logit, const Tensor& logits,
                                const Tensor& targets, std::int64_t vocab_start,
                                std::int64_t vocab_size, std::int32_t ignore_index) {
  const char* op = "cross_entropy_target_logit";
  check_shard_logits(op, logits, vocab_start, vocab_size);
  check_targets(op, targets, logits.size(0), logits.device());
  check_per_row(op, {&target_logit}, logits.size(0), logits.device());
  if (counted_on_meta({&logits, &targets, &target_logit}))
    return;  // shapes only: nothing to compute
  if (logits.device().is_cpu()) {
    const Tensor logits32 = as_f32(logits);
    cpu::cross_entropy_target_logit<float>(target_logit.data<float>(), logits32.data<float>(),
                                           targets.data<std::int32_t>(), logits.size(0),
                                           logits.size(1), vocab_start, vocab_size, ignore_index);
  } else {
#if TN_HAVE_CUDA
    cuda::cross_entropy_target_logit(target_logit, logits, targets, vocab_start, vocab_size,
                                     ignore_index);
#else
    TN_THROW(CudaError, "cross_entropy_target_logit: no CUDA kernel in this build");
#endif
  }
}

void cross_entropy_finish(Tensor& losses, Tensor& lse, const Tensor& global_max,
                          const Tensor& global_sum_exp, const Tensor& target_logit,
                          const Tensor& targets, std::int32_t ignore_index) {
  const char* op = "cross_entropy_finish";
  check_targets(op, targets, targets.numel(), targets.device());
  check_per_row(op, {&losses, &lse, &global_max, &global_sum_exp, &target_logit}, targets.numel(),
                targets.device());
  if (counted_on_meta({&targets, &losses, &lse})) return;  // shapes only: nothing to compute
  if (targets.device().is_cpu()) {
    cpu::cross_entropy_finish<float>(losses.data<float>(), lse.data<float>(),
                                     global_max.data<float>(), global_sum_exp.data<float>(),
                                     target_logit.data<float>(), targets.data<std::int32_t>(),
                                     targets.numel(), ignore_index);
  } else {
#if TN_HAVE_CUDA
    cuda::cross_entropy_finish(losses, lse, global_max, global_sum_exp, target_logit, targets,
                               ignore_index);
#else
    TN_THROW(CudaError, "cross_entropy_finish: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
