#include "kernels/attention.h"

#include <initializer_list>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {

struct AttentionDims {
  std::int64_t batch, seq, n_head, head_size;
};

// qkv [B, T, H * 3 * hs]; out and dout [B, T, H * hs]; probs [B, H, T, T].
AttentionDims check_attention_operands(const char* op, std::initializer_list<const Tensor*> all,
                                       const Tensor& out, const Tensor& probs, const Tensor& qkv,
                                       std::int64_t n_head) {
  for (const Tensor* t : all) {
    TN_CHECK(t->dtype() == DType::F32 && t->is_contiguous(), op,
             ": needs contiguous f32 tensors, got ", t->str());
    TN_CHECK(t->device() == qkv.device(), op, ": ", t->str(), " is not on qkv's device ",
             qkv.device().str());
  }
  TN_CHECK(qkv.dim() == 3 && n_head > 0 && qkv.size(2) % (3 * n_head) == 0, op, ": qkv ",
           shape_str(qkv.shape()), " is not [B, T, n_head * 3 * head_size] for n_head ", n_head);
  const std::int64_t batch = qkv.size(0), seq = qkv.size(1);
  const std::int64_t head_size = qkv.size(2) / (3 * n_head);
  TN_CHECK((out.shape() == Shape{batch, seq, n_head * head_size}), op, ": out ",
           shape_str(out.shape()), " for qkv ", shape_str(qkv.shape()), " and ", n_head, " heads");
  TN_CHECK((probs.shape() == Shape{batch, n_head, seq, seq}), op, ": probs ",
           shape_str(probs.shape()), " is not [B, n_head, T, T] for qkv ", shape_str(qkv.shape()),
           " and ", n_head, " heads");
  return {batch, seq, n_head, head_size};
}

}  // namespace

void attention_forward(Tensor& out, Tensor& probs, const Tensor& qkv, std::int64_t n_head) {
  const AttentionDims d =
      check_attention_operands("attention_forward", {&out, &probs, &qkv}, out, probs, qkv, n_head);
  if (qkv.device().is_cpu()) {
    cpu::attention_forward<float>(out.data<float>(), probs.data<float>(), qkv.data<float>(),
                                  d.batch, d.seq, d.n_head, d.head_size);
  } else {
    TN_THROW(CudaError, "attention_forward: no CUDA kernel in this build");
  }
}

void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                        std::int64_t n_head) {
  const AttentionDims d = check_attention_operands(
      "attention_backward", {&dqkv, &dout, &qkv, &probs}, dout, probs, qkv, n_head);
  TN_CHECK(dqkv.shape() == qkv.shape(), "attention_backward: dqkv ", shape_str(dqkv.shape()),
           " for qkv ", shape_str(qkv.shape()));
  if (qkv.device().is_cpu()) {
    cpu::attention_backward<float>(dqkv.data<float>(), dout.data<float>(), qkv.data<float>(),
                                   probs.data<float>(), d.batch, d.seq, d.n_head, d.head_size);
  } else {
    TN_THROW(CudaError, "attention_backward: no CUDA kernel in this build");
  }
}

}  // namespace ternion
