#include "kernels/embedding.h"

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

// Each tensor contiguous on `device` and of `dtype`.
void check_tensors(const char* op, std::initializer_list<const Tensor*> all, DType dtype,
                   Device device) {
  for (const Tensor* t : all) {
    TN_CHECK(t->dtype() == dtype && t->is_contiguous(), op, ": needs contiguous ",
             dtype_name(dtype), " tensors, got ", t->str());
    TN_CHECK(t->device() == device, op, ": ", t->str(), " is not on ", device.str());
  }
}

void check_float_dtype(const char* op, const Tensor& t) {
  TN_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, op, ": ", t.str(),
           " is not f32 or bf16");
}

// tokens i32 [...] and rows [..., C] for a table [V_local, C].
void check_token_shapes(const char* op, const Tensor& rows, const Tensor& tokens,
                        const Tensor& table) {
  TN_CHECK(tokens.dtype() == DType::I32 && tokens.is_contiguous(), op,
           ": tokens must be contiguous i32, got ", tokens.str());
  Shape expected = tokens.shape();
  expected.push_back(table.dim() == 2 ? table.size(1) : -1);
  TN_CHECK(table.dim() == 2 && rows.shape() == expected, op, ": ", shape_str(rows.shape()),
           " for tokens ", shape_str(tokens.shape()), " and table ", shape_str(table.shape()));
}

// rows [B, T, C] with T <= T_max for a table [T_max, C].
void check_position_shapes(const char* op, const Tensor& rows, const Tensor& table) {
  TN_CHECK(rows.dim() == 3 && table.dim() == 2 && rows.size(1) <= table.size(0) &&
               rows.size(2) == table.size(1),
           op, ": ", shape_str(rows.shape()), " is not [B, T <= T_max, C] for the table ",
           shape_str(table.shape()));
}

}  // namespace

// out and wte: one dtype, f32 or bf16 (a row copy; the bf16 path on the CPU stages the table).
void token_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                             std::int64_t vocab_start) {
  const char* op = "token_embedding_forward";
  check_float_dtype(op, wte);
  check_tensors(op, {&out, &wte}, wte.dtype(), tokens.device());
  check_token_shapes(op, out, tokens, wte);
  if (counted_on_meta({&tokens, &out, &out})) return;  // shapes only: nothing to compute
  if (tokens.device().is_cpu()) {
    const Tensor wte32 = as_f32(wte);
    F32Output out32(out);
    cpu::token_embedding_forward<float>(out32.get().data<float>(), tokens.data<std::int32_t>(),
                                        wte32.data<float>(), tokens.numel(), wte.size(0),
                                        wte.size(1), vocab_start);
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::token_embedding_forward(out, tokens, wte, vocab_start);
#else
    TN_THROW(CudaError, "token_embedding_forward: no CUDA kernel in this build");
#endif
  }
}

// dwte f32 (accumulates); dout f32 or bf16.
void token_embedding_backward(Tensor& dwte, const Tensor& dout, const Tensor& tokens,
                              std::int64_t vocab_start) {
  const char* op = "token_embedding_backward";
  check_float_dtype(op, dout);
  check_tensors(op, {&dout}, dout.dtype(), tokens.device());
  check_tensors(op, {&dwte}, DType::F32, tokens.device());
  check_token_shapes(op, dout, tokens, dwte);
  if (counted_on_meta({&tokens, &dout, &dout, &dout})) return;  // shapes only: nothing to compute
  if (tokens.device().is_cpu()) {
    const Tensor dout32 = as_f32(dout);
    cpu::token_embedding_backward<float>(dwte.data<float>(), dout32.data<float>(),
                                         tokens.data<std::int32_t>(), tokens.numel(), dwte.size(0),
                                         dwte.size(1), vocab_start);
  } else {
#if TN_HAVE_CUDA
    cuda::token_embedding_backward(dwte, dout, tokens, vocab_start);
#else
    TN_THROW(CudaError, "token_embedding_backward: no CUDA kernel in this build");
#endif
  }
}

// out and wpe: one dtype, f32 or bf16; out accumulates in place.
void position_embedding_forward(Tensor& out, const Tensor& wpe) {
  const char* op = "position_embedding_forward";
  check_float_dtype(op, out);
  check_tensors(op, {&out, &wpe}, out.dtype(), out.device());
  check_position_shapes(op, out, wpe);
  if (counted_on_meta({&out, &wpe, &out})) return;  // shapes only: nothing to compute
  if (out.device().is_cpu()) {
    const Tensor wpe32 = as_f32(wpe);
    F32Output out32(out, /*load=*/true);
    cpu::position_embedding_forward<float>(out32.get().data<float>(), wpe32.data<float>(),
                                           out.size(0), out.size(1), out.size(2));
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::position_embedding_forward(out, wpe);
#else
    TN_THROW(CudaError, "position_embedding_forward: no CUDA kernel in this build");
#endif
  }
}

// dwpe f32 (accumulates); dout f32 or bf16.
void position_embedding_backward(Tensor& dwpe, const Tensor& dout) {
  const char* op = "position_embedding_backward";
  check_float_dtype(op, dout);
  check_tensors(op, {&dout}, dout.dtype(), dout.device());
  check_tensors(op, {&dwpe}, DType::F32, dout.device());
  check_position_shapes(op, dout, dwpe);
  if (counted_on_meta({&dout, &dwpe, &dwpe})) return;  // shapes only: nothing to compute
  if (dout.device().is_cpu()) {
    const Tensor dout32 = as_f32(dout);
    cpu::position_embedding_backward<float>(dwpe.data<float>(), dout32.data<float>(),
                                            dout.size(0), dout.size(1), dout.size(2));
  } else {
#if TN_HAVE_CUDA
    cuda::position_embedding_backward(dwpe, dout);
#else
    TN_THROW(CudaError, "position_embedding_backward: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
