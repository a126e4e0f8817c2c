#include "kernels/attention.h"

#include <atomic>
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

std::atomic<AttentionKernel> g_attention_kernel{AttentionKernel::automatic};
std::atomic<bool> g_attention_deterministic{true};

struct AttentionDims {
  std::int64_t batch, seq, n_head, head_size;
};

// qkv [B, T, H * 3 * hs]; out and dout [B, T, H * hs], all contiguous, one device and one
// dtype: F32, or BF16 (CUDA natively; on CPU staged through F32 copies). lse [B, H, T] F32.
// `out` is the [B, T, H * hs] operand named `out_name` in messages (out, or the backward's dout).
AttentionDims check_attention_operands(const char* op, std::initializer_list<const Tensor*> all,
                                       const char* out_name, const Tensor& out, const Tensor& lse,
                                       const Tensor& qkv, std::int64_t n_head) {
  TN_CHECK(qkv.dtype() == DType::F32 || qkv.dtype() == DType::BF16, op,
           ": needs f32 or bf16 tensors, got qkv ", qkv.str());
  for (const Tensor* t : all) {
    TN_CHECK(t->dtype() == qkv.dtype() && t->is_contiguous(), op,
             ": needs contiguous tensors of qkv's dtype (", qkv.str(), "), got ", t->str());
    TN_CHECK(t->device() == qkv.device(), op, ": ", t->str(), " is not on qkv's device ",
             qkv.device().str());
  }
  TN_CHECK(qkv.dim() == 3 && n_head > 0 && qkv.size(2) % (3 * n_head) == 0, op, ": qkv ",
           shape_str(qkv.shape()), " is not [B, T, n_head * 3 * head_size] for n_head ", n_head);
  const std::int64_t batch = qkv.size(0), seq = qkv.size(1);
  const std::int64_t head_size = qkv.size(2) / (3 * n_head);
  TN_CHECK((out.shape() == Shape{batch, seq, n_head * head_size}), op, ": ", out_name, " ",
           shape_str(out.shape()), " for qkv ", shape_str(qkv.shape()), " and ", n_head, " heads");
  TN_CHECK(lse.dtype() == DType::F32 && lse.is_contiguous() && lse.device() == qkv.device(), op,
           ": lse must be a contiguous f32 tensor on qkv's device, got ", lse.str());
  TN_CHECK((lse.shape() == Shape{batch, n_head, seq}), op, ": lse ", shape_str(lse.shape()),
           " is not [B, n_head, T] for qkv ", shape_str(qkv.shape()), " and ", n_head, " heads");
  return {batch, seq, n_head, head_size};
}

// What attention costs, reported on the meta device by the implementation the setting picks.
// Fused (flash attention; the CPU's and cuDNN's): two products per (sequence, head), each over
// half the scores on average, S = Q K^T [T, T/2] and O = P V [T, hs] over T/2 keys, the
// backward twice their work (dV, dP; dQ, dK), as the model's FLOPs count it; the scores never
// reach memory, so the kernel's bytes are Q, K, V, O and the log-sum-exp.
// cuBLAS (kernels/cuda/attention.cu): whole [T, T] products, the backward recomputing the
// scores (two products forward, five backward), and the squares go through memory: per
// element forward the f32 scores written and read by the softmax, the probabilities (the
// operand dtype) written and read; backward the scores and dprobs (f32) each written and
// read, the probabilities written and read twice, dscores written and read twice; and the
// heads are copied out of and back into the rows' layout.
void record_attention_costs(const AttentionDims& d, DType dtype, bool backward) {
  const int e = static_cast<int>(dtype_size(dtype));
  const double heads = static_cast<double>(d.batch * d.n_head);
  if (attention_kernel() != AttentionKernel::cublas) {
    const double count = (backward ? 2 : 1) * heads;
    record_gemm({d.seq, d.seq / 2, d.head_size, e, /*fused=*/true}, count);
    record_gemm({d.seq, d.head_size, d.seq / 2, e, /*fused=*/true}, count);
    return;
  }
  const double square = static_cast<double>(d.seq) * static_cast<double>(d.seq);
  const double head = static_cast<double>(d.seq) * static_cast<double>(d.head_size);
  // S (and backward dP) [T, T] over hs; O (backward dV, dQ, dK) [T, hs] over T.
  record_gemm({d.seq, d.seq, d.head_size, e, /*fused=*/true}, (backward ? 2 : 1) * heads);
  record_gemm({d.seq, d.head_size, d.seq, e, /*fused=*/true}, (backward ? 3 : 1) * heads);
  const double square_bytes = backward ? 4.0 * 4 + 6.0 * e : 2.0 * 4 + 2.0 * e;
  // [T, hs] traffic beyond the operands counted_on_meta counts: the heads' copies and the
  // products' reads and writes of them (12 in all forward, 26 backward).
  const double head_copies = backward ? 26.0 - 8 : 12.0 - 4;
  record_memory_bytes(heads * (square * square_bytes + head * head_copies * e));
}

}  // namespace

void set_attention_kernel(AttentionKernel kernel) { g_attention_kernel.store(kernel); }
AttentionKernel attention_kernel() { return g_attention_kernel.load(); }
void set_attention_deterministic(bool deterministic) {
  g_attention_deterministic.store(deterministic);
}
bool attention_deterministic() { return g_attention_deterministic.load(); }

bool parse_attention_kernel(std::string_view text, AttentionKernel& kernel) {
  if (text == "auto") {
    kernel = AttentionKernel::automatic;
  } else if (text == "cudnn") {
    kernel = AttentionKernel::cudnn;
  } else if (text == "cublas") {
    kernel = AttentionKernel::cublas;
  } else {
    return false;
  }
  return true;
}

std::string attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::automatic: return "auto";
    case AttentionKernel::cudnn: return "cudnn";
    case AttentionKernel::cublas: return "cublas";
  }
  return "?";
}

void attention_forward(Tensor& out, Tensor& lse, const Tensor& qkv, std::int64_t n_head) {
  const AttentionDims d =
      check_attention_operands("attention_forward", {&out, &qkv}, "out", out, lse, qkv, n_head);
  if (qkv.device().is_meta()) {  // shapes only: nothing to compute
    record_attention_costs(d, qkv.dtype(), /*backward=*/false);
    counted_on_meta({&qkv, &out, &lse});
    return;
  }
  if (!qkv.device().is_cpu()) {
#if TN_HAVE_CUDA
    cuda::attention_forward(out, lse, qkv, n_head, attention_kernel());
    return;
#else
    TN_THROW(CudaError, "attention_forward: no CUDA kernel in this build");
#endif
  }
  // BF16 on CPU: F32 copies in, F32 stand-ins out (F32 tensors pass through untouched).
  const Tensor qkv_f32 = as_f32(qkv);
  F32Output out_f32(out);
  cpu::attention_forward<float>(out_f32.get().data<float>(), lse.data<float>(),
                                qkv_f32.data<float>(), d.batch, d.seq, d.n_head, d.head_size);
  out_f32.store();
}

void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                        const Tensor& lse, std::int64_t n_head) {
  const AttentionDims d = check_attention_operands(
      "attention_backward", {&dqkv, &dout, &qkv, &out}, "dout", dout, lse, qkv, n_head);
  TN_CHECK(dqkv.shape() == qkv.shape(), "attention_backward: dqkv ", shape_str(dqkv.shape()),
           " for qkv ", shape_str(qkv.shape()));
  TN_CHECK(out.shape() == dout.shape(), "attention_backward: out ", shape_str(out.shape()),
           " for dout ", shape_str(dout.shape()));
  if (qkv.device().is_meta()) {  // shapes only: nothing to compute
    record_attention_costs(d, qkv.dtype(), /*backward=*/true);
    counted_on_meta({&qkv, &dout, &out, &lse, &dqkv});
    return;
  }
  if (!qkv.device().is_cpu()) {
#if TN_HAVE_CUDA
    cuda::attention_backward(dqkv, dout, qkv, out, lse, n_head, attention_kernel());
    return;
#else
    TN_THROW(CudaError, "attention_backward: no CUDA kernel in this build");
#endif
  }
  const Tensor dout_f32 = as_f32(dout), qkv_f32 = as_f32(qkv), out_f32 = as_f32(out);
  F32Output dqkv_f32(dqkv);  // overwritten, so nothing to load
  cpu::attention_backward<float>(dqkv_f32.get().data<float>(), dout_f32.data<float>(),
                                 qkv_f32.data<float>(), out_f32.data<float>(), lse.data<float>(),
                                 d.batch, d.seq, d.n_head, d.head_size);
  dqkv_f32.store();
}

}  // namespace ternion
