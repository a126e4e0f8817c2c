// GELU forward and backward, elementwise (the math is in kernels/gelu_math.h).
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

template void gelu_forward<float>(float*, const float*, i64);
template void gelu_forward<double>(double*, const double*, i64);
template void gelu_backward<float>(float*, const float*, const float*, i64);
template void gelu_backward<double>(double*, const double*, const double*, i64);

}  // namespace ternion::cpu
