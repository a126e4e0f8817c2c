// GELU forward and backward, elementwise (the math is in kernels/gelu_math.h).
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/gelu_math.h"

namespace ternion::cpu {

namespace {
constexpr i64 kMinParallelElements = 1 << 14;
}

template <class T>
void gelu_forward(T* out, const T* x, i64 n) {
  // out may alias x: each element is read before it is written.
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) out[i] = gelu_value(x[i]);
}

template <class T>
void gelu_backward(T* dx, const T* x, const T* dout, i64 n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) dx[i] = gelu_derivative(x[i]) * dout[i];
}

// The backward with the bias gradient in the same pass, so dx is summed from registers rather
// than read back: tasks own column blocks and add rows in order, as bias_add_backward does,
// so dbias is bit for bit its sum of dx whatever the thread count. dx may alias dout.
template <class T>
void gelu_backward_bias(T* dx, T* dbias, const T* x, const T* dout, i64 rows, i64 cols) {
  constexpr i64 kBlock = 512;  // 2 KiB of f32 a row: contiguous reads, sums in L1
  const i64 n_blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelElements)
  for (i64 block = 0; block < n_blocks; ++block) {
    const i64 c0 = block * kBlock, width = std::min(kBlock, cols - c0);
    T sum[kBlock] = {};
    for (i64 r = 0; r < rows; ++r) {
      const i64 offset = r * cols + c0;
#pragma omp simd
      for (i64 c = 0; c < width; ++c) {
        const T d = gelu_derivative(x[offset + c]) * dout[offset + c];
        dx[offset + c] = d;
        sum[c] += d;
      }
    }
    for (i64 c = 0; c < width; ++c) dbias[c0 + c] += sum[c];
  }
}

template void gelu_forward<float>(float*, const float*, i64);
template void gelu_forward<double>(double*, const double*, i64);
template void gelu_backward<float>(float*, const float*, const float*, i64);
template void gelu_backward<double>(double*, const double*, const double*, i64);
template void gelu_backward_bias<float>(float*, float*, const float*, const float*, i64, i64);
template void gelu_backward_bias<double>(double*, double*, const double*, const double*, i64,
                                         i64);

}  // namespace ternion::cpu
