// out = alpha * op(a) op(b) + beta * out through OpenBLAS, row-major.
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion::cpu {

namespace {

void gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, blasint m, blasint n, blasint k,
          float alpha, const float* a, blasint lda, const float* b, blasint ldb, float beta,
          float* c, blasint ldc) {
  cblas_sgemm(CblasRowMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, blasint m, blasint n, blasint k,
          double alpha, const double* a, blasint lda, const double* b, blasint ldb, double beta,
          double* c, blasint ldc) {
  cblas_dgemm(CblasRowMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

template <class T>
void matmul(T* out, const T* a, const T* b, i64 m, i64 n, i64 k, bool transpose_a, bool transpose_b,
            T alpha, T beta) {
  if (m == 0 || n == 0) return;
  // Leading dimensions of the operands as stored: a is [M, K], or [K, M] when transposed;
  // b is [K, N], or [N, K]. BLAS wants them >= 1 even when K is 0.
  auto ld = [](i64 extent) { return static_cast<blasint>(std::max<i64>(1, extent)); };
  gemm(transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
       static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
       ld(transpose_a ? m : k), b, ld(transpose_b ? k : n), beta, out, ld(n));
}

template <class T>
void matmul_strided(T* out, i64 ld_out, const T* a, i64 ld_a, const T* b, i64 ld_b, i64 m, i64 n,
                    i64 k, bool transpose_a, bool transpose_b, T alpha, T beta) {
  if (m == 0 || n == 0) return;
  gemm(transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
       static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
       static_cast<blasint>(ld_a), b, static_cast<blasint>(ld_b), beta, out,
       static_cast<blasint>(ld_out));
}

template void matmul_strided<float>(float*, i64, const float*, i64, const float*, i64, i64, i64,
                                    i64, bool, bool, float, float);
template void matmul_strided<double>(double*, i64, const double*, i64, const double*, i64, i64,
                                     i64, i64, bool, bool, double, double);
template void matmul<float>(float*, const float*, const float*, i64, i64, i64, bool, bool, float,
                            float);
template void matmul<double>(double*, const double*, const double*, i64, i64, i64, bool, bool,
                             double, double);

}  // namespace ternion::cpu
