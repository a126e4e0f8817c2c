// GELU forward and backward, elementwise (the math is in kernels/gelu_math.h).
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/threads.h"
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
// than read back. Each thread takes one contiguous span of columns (long streams for the
// prefetchers) and adds rows in order, as bias_add_backward does: so dbias is bit for bit its
// sum of dx, whatever the spans and the thread count. dx may alias dout.
template <class T>
void gelu_backward_bias(T* dx, T* dbias, const T* x, const T* dout, i64 rows, i64 cols) {
  const i64 threads = rows * cols >= kMinParallelElements ? num_threads() : 1;
  const i64 spans = std::max<i64>(1, std::min(threads, cols / 64));
  const i64 span = ((cols + spans - 1) / spans + 15) / 16 * 16;  // whole 64-byte lines
  std::vector<T> sums(static_cast<std::size_t>(cols), static_cast<T>(0));  // a span each
#pragma omp parallel for schedule(static) if (spans > 1)
  for (i64 s = 0; s < spans; ++s) {
    const i64 c0 = s * span, width = std::min(span, cols - c0);
    if (width <= 0) continue;
    T* sum = sums.data() + c0;
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
