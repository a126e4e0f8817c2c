#include "kernels/matmul.h"

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "framework/features.h"
#include "framework/op_cost.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ternion {

namespace {
bool is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::BF16; }
}  // namespace

void matmul(Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
            float alpha, float beta) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&out, &a, &b})
    TN_CHECK(is_float(t->dtype()) && t->dim() == 2 && t->is_contiguous(),
             "matmul: operands must be contiguous 2-D f32 or bf16, got ", t->str());
  // a and b one dtype; out theirs, or F32 (bf16 inputs accumulating into f32 weight gradients).
  TN_CHECK(a.dtype() == b.dtype() && (out.dtype() == a.dtype() || out.dtype() == DType::F32),
           "matmul: dtypes out ", out.str(), ", a ", a.str(), ", b ", b.str(),
           " (a and b one dtype; out theirs or f32)");
  TN_CHECK(a.device() == out.device() && b.device() == out.device(), "matmul: out ", out.str(),
           ", a ", a.str(), ", b ", b.str(), " are on different devices");
  const std::int64_t m = a.size(transpose_a ? 1 : 0), k = a.size(transpose_a ? 0 : 1);
  const std::int64_t kb = b.size(transpose_b ? 1 : 0), n = b.size(transpose_b ? 0 : 1);
  TN_CHECK(k == kb && out.size(0) == m && out.size(1) == n, "matmul: out ", shape_str(out.shape()),
           " = op(a ", shape_str(a.shape()), (transpose_a ? "^T" : ""), ") @ op(b ",
           shape_str(b.shape()), (transpose_b ? "^T" : ""), ")");
  constexpr std::int64_t kBlasMax = std::numeric_limits<std::int32_t>::max();
  TN_CHECK(m <= kBlasMax && n <= kBlasMax && k <= kBlasMax,
           "matmul: dimensions exceed BLAS's 32-bit integers: ", m, " x ", n, " x ", k);

  if (out.device().is_meta()) {  // shapes only: nothing to compute
    record_gemm({m, n, k, static_cast<int>(dtype_size(a.dtype()))});
    return;
  }
  if (out.device().is_cpu()) {
    // BF16 operands are staged through F32 (no copies when everything is F32); out is loaded
    // when beta reads it.
    const Tensor a32 = as_f32(a), b32 = as_f32(b);
    F32Output out32(out, /*load=*/beta != 0.0f);
    cpu::matmul<float>(out32.get().data<float>(), a32.data<float>(), b32.data<float>(), m, n, k,
                       transpose_a, transpose_b, alpha, beta);
    out32.store();
  } else {
#if TN_HAVE_CUDA
    cuda::matmul(out, a, b, transpose_a, transpose_b, alpha, beta);
#else
    TN_THROW(CudaError, "matmul: no CUDA kernel in this build");
#endif
  }
}

}  // namespace ternion
