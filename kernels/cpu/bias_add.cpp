// Bias add over the last dimension, and its column-sum backward.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion::cpu {

namespace {
// Columns one task of the backward sums. Tasks own disjoint columns and add rows in order, so
// dbias does not depend on the thread count; 64 floats keep the accumulators in registers.
constexpr i64 kColumnBlock = 64;
constexpr i64 kMinParallelElements = 1 << 14;
}  // namespace

template <class T>
void bias_add_forward(T* out, const T* bias, i64 rows, i64 cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) {
    T* row = out + r * cols;
    #pragma omp simd
    for (i64 c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

template <class T>
void bias_add_backward(T* dbias, const T* dout, i64 rows, i64 cols) {
  const i64 n_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelElements)
  for (i64 block = 0; block < n_blocks; ++block) {
    const i64 c0 = block * kColumnBlock;
    const i64 width = std::min(kColumnBlock, cols - c0);
    T sum[kColumnBlock] = {};
    for (i64 r = 0; r < rows; ++r) {
      const T* row = dout + r * cols + c0;
      #pragma omp simd
      for (i64 c = 0; c < width; ++c) sum[c] += row[c];
    }
    for (i64 c = 0; c < width; ++c) dbias[c0 + c] += sum[c];
  }
}

template void bias_add_forward<float>(float*, const float*, i64, i64);
template void bias_add_forward<double>(double*, const double*, i64, i64);
template void bias_add_backward<float>(float*, const float*, i64, i64);
template void bias_add_backward<double>(double*, const double*, i64, i64);

}  // namespace ternion::cpu
