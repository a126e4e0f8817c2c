// LayerNorm over the last dimension: rows are independent in the forward and in dx; the
// parameter gradients are column sums over rows, computed by column blocks so that their
// order of summation is fixed (rows in order) whatever the thread count.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion::cpu {

namespace {
constexpr i64 kColumnBlock = 64;
constexpr i64 kMinParallelElements = 1 << 14;
}  // namespace

template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                        i64 rows, i64 cols, T eps) {
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (i64 c = 0; c < cols; ++c) sum += xr[c];
    const T first_mu = sum / static_cast<T>(cols);
    // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels.
    // The second also sums the deviations: they correct the mean's rounding, which would
    // otherwise stand as a variance of its own (a constant row would normalise to +-1, not 0).
    T deviations = 0, squares = 0;
#pragma omp simd reduction(+ : deviations, squares)
    for (i64 c = 0; c < cols; ++c) {
      const T d = xr[c] - first_mu;
      deviations += d;
      squares += d * d;
    }
    const T shift = deviations / static_cast<T>(cols);
    const T mu = first_mu + shift;
    const T variance = std::max(squares / static_cast<T>(cols) - shift * shift, static_cast<T>(0));
    const T s = static_cast<T>(1) / std::sqrt(variance + eps);
    T* outr = out + r * cols;
    #pragma omp simd
    for (i64 c = 0; c < cols; ++c) outr[c] = (xr[c] - mu) * s * weight[c] + bias[c];
    mean[r] = mu;
    rstd[r] = s;
  }
}

template <class T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,
                         const T* mean, const T* rstd, i64 rows, i64 cols) {
  const bool parallel = rows * cols >= kMinParallelElements;
  // dweight[c] += sum_r dout[r,c] xhat[r,c], dbias[c] += sum_r dout[r,c]. Done before dx so
  // that it reads dout before any write to dx.
  const i64 n_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel)
  for (i64 block = 0; block < n_blocks; ++block) {
    const i64 c0 = block * kColumnBlock;
    const i64 width = std::min(kColumnBlock, cols - c0);
    T dw[kColumnBlock] = {};
    T db[kColumnBlock] = {};
    for (i64 r = 0; r < rows; ++r) {
      const T* xr = x + r * cols + c0;
      const T* dr = dout + r * cols + c0;
      const T mu = mean[r], s = rstd[r];
      for (i64 c = 0; c < width; ++c) {
        dw[c] += dr[c] * ((xr[c] - mu) * s);
        db[c] += dr[c];
      }
    }
    for (i64 c = 0; c < width; ++c) {
      dweight[c0 + c] += dw[c];
      dbias[c0 + c] += db[c];
    }
  }

  // dx = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = dout * weight.
#pragma omp parallel for schedule(static) if (parallel)
  for (i64 r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const T* dr = dout + r * cols;
    const T mu = mean[r], s = rstd[r];
    T sum_dnorm = 0, sum_dnorm_xhat = 0;
#pragma omp simd reduction(+ : sum_dnorm, sum_dnorm_xhat)
    for (i64 c = 0; c < cols; ++c) {
      const T dnorm = dr[c] * weight[c];
      sum_dnorm += dnorm;
      sum_dnorm_xhat += dnorm * ((xr[c] - mu) * s);
    }
    const T mean_dnorm = sum_dnorm / static_cast<T>(cols);
    const T mean_dnorm_xhat = sum_dnorm_xhat / static_cast<T>(cols);
    T* dxr = dx + r * cols;
    for (i64 c = 0; c < cols; ++c) {
      const T xhat = (xr[c] - mu) * s;
      dxr[c] = (dr[c] * weight[c] - mean_dnorm - xhat * mean_dnorm_xhat) * s;
    }
  }
}

template void layer_norm_forward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, i64, i64, float);
template void layer_norm_forward<double>(double*, double*, double*, const double*, const double*,
                                         const double*, i64, i64, double);
template void layer_norm_backward<float>(float*, float*, float*, const float*, const float*,
                                         const float*, const float*, const float*, i64, i64);
template void layer_norm_backward<double>(double*, double*, double*, const double*, const double*,
                                          const double*, const double*, const double*, i64, i64);

}  // namespace ternion::cpu
