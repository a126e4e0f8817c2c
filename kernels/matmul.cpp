#include "kernels/matmul.h"

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion {

void matmul(Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
            float alpha, float beta) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&out, &a, &b})
    TN_CHECK(t->dtype() == DType::F32 && t->dim() == 2 && t->is_contiguous(),
             "matmul: operands must be contiguous 2-D f32, got ", t->str());
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

  if (out.device().is_cpu()) {
    cpu::matmul<float>(out.data<float>(), a.data<float>(), b.data<float>(), m, n, k, transpose_a,
                       transpose_b, alpha, beta);
  } else {
    TN_THROW(CudaError, "matmul: no CUDA kernel in this build");
  }
}

}  // namespace ternion
