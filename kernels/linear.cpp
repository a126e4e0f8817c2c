#include "kernels/linear.h"

#include <atomic>
#include <utility>

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/matmul.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {

bool is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::BF16; }

void check_operand(const char* what, const Tensor& t, std::int64_t dims, const Tensor& x) {
  TN_CHECK(t.dim() == dims && t.is_contiguous() && t.dtype() == x.dtype(), "linear_forward: ",
           what, " ", t.str(), " must be a contiguous ", dims, "-D tensor of x's dtype (x ",
           x.str(), ")");
  TN_CHECK(t.device() == x.device(), "linear_forward: ", what, " ", t.str(), " and x ", x.str(),
           " are on different devices");
}

void check_operands(const Tensor& out, const Tensor* pre_activation, const Tensor& x,
                    const Tensor& w, const Tensor* bias, LinearActivation activation,
                    const Tensor* residual) {
  TN_CHECK(is_float(x.dtype()) && x.dim() == 2 && x.is_contiguous(),
           "linear_forward: x must be a contiguous 2-D f32 or bf16 tensor [rows, k], got ",
           x.str());
  check_operand("w", w, 2, x);
  check_operand("out", out, 2, x);
  if (bias != nullptr) check_operand("bias", *bias, 1, x);
  const std::int64_t rows = x.size(0), k = x.size(1), n = w.size(0);
  TN_CHECK(w.size(1) == k && out.size(0) == rows && out.size(1) == n &&
               (bias == nullptr || bias->size(0) == n),
           "linear_forward: out ", shape_str(out.shape()), " = x ", shape_str(x.shape()),
           " @ w ", shape_str(w.shape()), "^T", (bias != nullptr ? " + bias " : ""),
           (bias != nullptr ? shape_str(bias->shape()) : ""),
           " (x [rows, k], w [n, k], bias [n], out [rows, n])");
  if (activation == LinearActivation::gelu) {
    TN_CHECK(pre_activation != nullptr,
             "linear_forward: gelu needs a pre_activation tensor [rows, n] for the backward");
    check_operand("pre_activation", *pre_activation, 2, x);
    TN_CHECK(pre_activation->shape() == out.shape(), "linear_forward: pre_activation ",
             shape_str(pre_activation->shape()), " must have out's shape ",
             shape_str(out.shape()));
    TN_CHECK(out.numel() == 0 || !pre_activation->same_start_as(out),
             "linear_forward: pre_activation and out must be different tensors");
  } else {
    TN_CHECK(pre_activation == nullptr, "linear_forward: pre_activation is only written with ",
             "gelu, got one with activation ", linear_activation_name(activation));
  }
  if (residual != nullptr) {
    TN_CHECK(activation == LinearActivation::none, "linear_forward: a residual is added only ",
             "without an activation, got ", linear_activation_name(activation));
    check_operand("residual", *residual, 2, x);
    TN_CHECK(residual->shape() == out.shape(), "linear_forward: residual ",
             shape_str(residual->shape()), " must have out's shape ", shape_str(out.shape()));
    TN_CHECK(out.numel() == 0 || !residual->same_start_as(out),
             "linear_forward: residual and out must be different tensors");
  }
}

// affine = x @ w^T (+ bias), the kernels one after the other.
void affine_unfused(Tensor& affine, const Tensor& x, const Tensor& w, const Tensor* bias) {
  matmul(affine, x, w, false, true);
  if (bias != nullptr) bias_add_forward(affine, *bias);
}

}  // namespace

namespace {
std::atomic<GeluEpilogue> g_gelu_epilogue{GeluEpilogue::check};

#if TN_HAVE_CUDA
// Whether the GELU epilogues may run for this GEMM shape (features out, inner in).
bool gelu_epilogue_allowed(std::int64_t features, std::int64_t inner) {
  switch (gelu_epilogue()) {
    case GeluEpilogue::off:
      return false;
    case GeluEpilogue::on:
      (void)cuda::gelu_epilogues_agree(features, inner);  // logs the deviation, once per shape
      return true;
    case GeluEpilogue::check:
      return cuda::gelu_epilogues_agree(features, inner);
  }
  return false;
}
#endif
}  // namespace

void set_gelu_epilogue(GeluEpilogue policy) { g_gelu_epilogue.store(policy); }
GeluEpilogue gelu_epilogue() { return g_gelu_epilogue.load(); }

bool parse_gelu_epilogue(std::string_view text, GeluEpilogue& policy) {
  if (text == "check") {
    policy = GeluEpilogue::check;
  } else if (text == "on") {
    policy = GeluEpilogue::on;
  } else if (text == "off") {
    policy = GeluEpilogue::off;
  } else {
    return false;
  }
  return true;
}

const char* linear_activation_name(LinearActivation activation) {
  switch (activation) {
    case LinearActivation::none:
      return "none";
    case LinearActivation::gelu:
      return "gelu";
  }
  return "?";
}

void linear_forward(Tensor& out, Tensor* pre_activation, const Tensor& x, const Tensor& w,
                    const Tensor* bias, LinearActivation activation, const Tensor* residual) {
  check_operands(out, pre_activation, x, w, bias, activation, residual);
  // With GELU the affine result is the pre-activation, and out is computed from it.
  const bool gelu = activation == LinearActivation::gelu;
  Tensor& affine = gelu ? *pre_activation : out;
  if (x.device().is_meta()) {  // shapes only: nothing to compute
    // What the CPU path runs: the GEMM, then the bias, GELU and residual passes.
    record_gemm({x.size(0), w.size(0), w.size(1), static_cast<int>(dtype_size(x.dtype()))});
    if (bias != nullptr) counted_on_meta({&affine, bias, &affine});
    if (gelu) counted_on_meta({&affine, &out});
    if (residual != nullptr) counted_on_meta({&out, residual, &out});
    return;
  }
  if (x.device().is_cpu()) {
    affine_unfused(affine, x, w, bias);
  } else {
#if TN_HAVE_CUDA
    // One GEMM adding bias and residual, where cuBLASLt has one for this problem.
    if (residual != nullptr && cuda::matmul_bias_residual(out, x, w, bias, residual)) return;
    if (gelu && x.dtype() == DType::BF16 && gelu_epilogue_allowed(w.size(0), x.size(1)) &&
        cuda::matmul_bias_gelu(out, affine, x, w, bias))
      return;
    // One GEMM with the bias epilogue where cuBLASLt has one for this problem, else two passes.
    if (bias == nullptr || !cuda::matmul_bias(affine, x, w, *bias))
      affine_unfused(affine, x, w, bias);
#else
    TN_THROW(CudaError, "linear_forward: no CUDA kernel in this build");
#endif
  }
  if (gelu) gelu_forward(out, affine);
  if (residual != nullptr) accumulate(out, *residual);
}

void linear_backward_weights(Tensor& dw, Tensor* dbias, const Tensor& dy, const Tensor& x) {
  TN_CHECK(is_float(dy.dtype()) && dy.dim() == 2 && dy.is_contiguous() && x.dim() == 2 &&
               x.is_contiguous() && x.dtype() == dy.dtype() && x.device() == dy.device(),
           "linear_backward_weights: dy ", dy.str(), " and x ", x.str(),
           " must be contiguous 2-D tensors of one float dtype on one device");
  TN_CHECK(dw.dtype() == DType::F32 && dw.dim() == 2 && dw.is_contiguous() &&
               dw.device() == dy.device() &&
               dw.size(0) == dy.size(1) && dw.size(1) == x.size(1) && x.size(0) == dy.size(0),
           "linear_backward_weights: dw ", dw.str(), " += dy ", dy.str(), "^T @ x ", x.str(),
           " (dw f32 [n, k], dy [rows, n], x [rows, k])");
  if (dbias != nullptr) {
    TN_CHECK(dbias->dtype() == DType::F32 && dbias->dim() == 1 && dbias->is_contiguous() &&
                 dbias->size(0) == dy.size(1) && dbias->device() == dy.device(),
             "linear_backward_weights: dbias ", dbias->str(), " must be a contiguous f32 [",
             dy.size(1), "] on dy's device (dy ", dy.str(), ")");
  }
#if TN_HAVE_CUDA
  if (dy.device().type == DeviceType::CUDA && dbias != nullptr) {
    Tensor sums = Tensor::empty(dbias->shape(), DType::F32, dbias->device());
    if (cuda::matmul_weight_and_bias_grad(dw, sums, dy, x)) {
      accumulate(*dbias, sums);
      return;
    }
  }
#endif
  matmul(dw, dy, x, true, false, 1.0f, 1.0f);
  if (dbias != nullptr) bias_add_backward(*dbias, dy);
}

void linear_backward_through_gelu(Tensor& dpre, const Tensor& dy, const Tensor& w,
                                  const Tensor& pre_activation) {
  TN_CHECK(is_float(dy.dtype()) && dy.dim() == 2 && dy.is_contiguous(),
           "linear_backward_through_gelu: dy must be a contiguous 2-D f32 or bf16 tensor ",
           "[rows, n], got ", dy.str());
  for (const auto& [what, t] : {std::pair<const char*, const Tensor*>{"w", &w},
                                {"pre_activation", &pre_activation},
                                {"dpre", &dpre}}) {
    TN_CHECK(t->dim() == 2 && t->is_contiguous() && t->dtype() == dy.dtype() &&
                 t->device() == dy.device(),
             "linear_backward_through_gelu: ", what, " ", t->str(),
             " must be a contiguous 2-D tensor of dy's dtype on dy's device (dy ", dy.str(), ")");
  }
  const std::int64_t rows = dy.size(0), n = dy.size(1), k = w.size(1);
  TN_CHECK(w.size(0) == n && dpre.size(0) == rows && dpre.size(1) == k &&
               pre_activation.shape() == dpre.shape(),
           "linear_backward_through_gelu: dpre ", shape_str(dpre.shape()), " = gelu'(pre ",
           shape_str(pre_activation.shape()), ") * (dy ", shape_str(dy.shape()), " @ w ",
           shape_str(w.shape()), ") (dy [rows, n], w [n, k], pre and dpre [rows, k])");
  TN_CHECK(dpre.numel() == 0 ||
               (!dpre.same_start_as(pre_activation) && !dpre.same_start_as(dy)),
           "linear_backward_through_gelu: dpre must be a tensor of its own, not "
           "pre_activation's or dy's memory");
#if TN_HAVE_CUDA
  if (dy.device().type == DeviceType::CUDA && dy.dtype() == DType::BF16 &&
      gelu_epilogue_allowed(dpre.size(1), dy.size(1)) &&
      cuda::matmul_dgelu(dpre, dy, w, pre_activation))
    return;
#endif
  matmul(dpre, dy, w, false, false);
  gelu_backward(dpre, pre_activation, dpre);
}

}  // namespace ternion
