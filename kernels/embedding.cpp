#include "kernels/embedding.h"

#include <initializer_list>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

namespace {

void check_f32(const char* op, std::initializer_list<const Tensor*> all, Device device) {
  for (const Tensor* t : all) {
    TN_CHECK(t->dtype() == DType::F32 && t->is_contiguous(), op,
             ": needs contiguous f32 tensors, got ", t->str());
    TN_CHECK(t->device() == device, op, ": ", t->str(), " is not on ", device.str());
  }
}

// tokens i32 [...] and rows [..., C] for a table [V_local, C].
void check_token_operands(const char* op, const Tensor& rows, const Tensor& tokens,
                          const Tensor& table) {
  check_f32(op, {&rows, &table}, tokens.device());
  TN_CHECK(tokens.dtype() == DType::I32 && tokens.is_contiguous(), op,
           ": tokens must be contiguous i32, got ", tokens.str());
  Shape expected = tokens.shape();
  expected.push_back(table.dim() == 2 ? table.size(1) : -1);
  TN_CHECK(table.dim() == 2 && rows.shape() == expected, op, ": ", shape_str(rows.shape()),
           " for tokens ", shape_str(tokens.shape()), " and table ", shape_str(table.shape()));
}

// rows [B, T, C] with T <= T_max for a table [T_max, C].
void check_position_operands(const char* op, const Tensor& rows, const Tensor& table) {
  check_f32(op, {&rows, &table}, rows.device());
  TN_CHECK(rows.dim() == 3 && table.dim() == 2 && rows.size(1) <= table.size(0) &&
               rows.size(2) == table.size(1),
           op, ": ", shape_str(rows.shape()), " is not [B, T <= T_max, C] for the table ",
           shape_str(table.shape()));
}

}  // namespace

void token_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                             std::int64_t vocab_start) {
  check_token_operands("token_embedding_forward", out, tokens, wte);
  if (tokens.device().is_cpu()) {
    cpu::token_embedding_forward<float>(out.data<float>(), tokens.data<std::int32_t>(),
                                        wte.data<float>(), tokens.numel(), wte.size(0), wte.size(1),
                                        vocab_start);
  } else {
    TN_THROW(CudaError, "token_embedding_forward: no CUDA kernel in this build");
  }
}

void token_embedding_backward(Tensor& dwte, const Tensor& dout, const Tensor& tokens,
                              std::int64_t vocab_start) {
  check_token_operands("token_embedding_backward", dout, tokens, dwte);
  if (tokens.device().is_cpu()) {
    cpu::token_embedding_backward<float>(dwte.data<float>(), dout.data<float>(),
                                         tokens.data<std::int32_t>(), tokens.numel(), dwte.size(0),
                                         dwte.size(1), vocab_start);
  } else {
    TN_THROW(CudaError, "token_embedding_backward: no CUDA kernel in this build");
  }
}

void position_embedding_forward(Tensor& out, const Tensor& wpe) {
  check_position_operands("position_embedding_forward", out, wpe);
  if (out.device().is_cpu()) {
    cpu::position_embedding_forward<float>(out.data<float>(), wpe.data<float>(), out.size(0),
                                           out.size(1), out.size(2));
  } else {
    TN_THROW(CudaError, "position_embedding_forward: no CUDA kernel in this build");
  }
}

void position_embedding_backward(Tensor& dwpe, const Tensor& dout) {
  check_position_operands("position_embedding_backward", dout, dwpe);
  if (dout.device().is_cpu()) {
    cpu::position_embedding_backward<float>(dwpe.data<float>(), dout.data<float>(), dout.size(0),
                                            dout.size(1), dout.size(2));
  } else {
    TN_THROW(CudaError, "position_embedding_backward: no CUDA kernel in this build");
  }
}

}  // namespace ternion
