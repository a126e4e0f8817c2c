// RMSNorm over the last dimension: rows are independent in the forward and in dx; the weight
// gradient is a column sum over rows, computed by column blocks so that its order of summation
// is fixed (rows in order) whatever the thread count.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vector_math.h"

namespace ternion::cpu {

namespace {
constexpr i64 kColumnBlock = 64;
constexpr i64 kMinParallelElements = 1 << 14;
}  // namespace

template <class T>
void rms_norm_forward(T* out, T* rstd, const T* x, const T* weight, i64 rows, i64 cols, T eps) {
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T squares = 0;
#pragma omp simd reduction(+ : squares)
    for (i64 c = 0; c < cols; ++c) squares += xr[c] * xr[c];
    const T s = static_cast<T>(1) / fast_sqrt(squares / static_cast<T>(cols) + eps);
    T* outr = out + r * cols;
#pragma omp simd
    for (i64 c = 0; c < cols; ++c) outr[c] = xr[c] * s * weight[c];
    rstd[r] = s;
  }
}

template <class T>
void rms_norm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight,
                       const T* rstd, i64 rows, i64 cols) {
  const bool parallel = rows * cols >= kMinParallelElements;
  // dweight[c] += sum_r dout[r,c] xhat[r,c]. Done before dx so that it reads dout before any
  // write to dx (which may alias it).
  const i64 n_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel)
  for (i64 block = 0; block < n_blocks; ++block) {
    const i64 c0 = block * kColumnBlock;
    const i64 width = std::min(kColumnBlock, cols - c0);
    T dw[kColumnBlock] = {};
    for (i64 r = 0; r < rows; ++r) {
      const T* xr = x + r * cols + c0;
      const T* dr = dout + r * cols + c0;
      const T s = rstd[r];
#pragma omp simd
      for (i64 c = 0; c < width; ++c) dw[c] += dr[c] * (xr[c] * s);
    }
    for (i64 c = 0; c < width; ++c) dweight[c0 + c] += dw[c];
  }

  // dx = rstd * (dnorm - xhat * mean(dnorm * xhat)), dnorm = dout * weight.
#pragma omp parallel for schedule(static) if (parallel)
  for (i64 r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const T* dr = dout + r * cols;
    const T s = rstd[r];
    T sum_dnorm_xhat = 0;
#pragma omp simd reduction(+ : sum_dnorm_xhat)
    for (i64 c = 0; c < cols; ++c) sum_dnorm_xhat += dr[c] * weight[c] * (xr[c] * s);
    const T mean_dnorm_xhat = sum_dnorm_xhat / static_cast<T>(cols);
    T* dxr = dx + r * cols;
#pragma omp simd
    for (i64 c = 0; c < cols; ++c)
      dxr[c] = (dr[c] * weight[c] - (xr[c] * s) * mean_dnorm_xhat) * s;
  }
}

template void rms_norm_forward<float>(float*, float*, const float*, const float*, i64, i64, float);
template void rms_norm_forward<double>(double*, double*, const double*, const double*, i64, i64,
                                       double);
template void rms_norm_backward<float>(float*, float*, const float*, const float*, const float*,
                                       const float*, i64, i64);
template void rms_norm_backward<double>(double*, double*, const double*, const double*,
                                        const double*, const double*, i64, i64);

}  // namespace ternion::cpu
