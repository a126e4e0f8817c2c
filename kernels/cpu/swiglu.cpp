// SwiGLU forward and backward, elementwise over (gate, up) pairs (the math is in
// kernels/swiglu_math.h). Pairs sit side by side in gate_up, so feature i of the flattened
// [rows, F] output reads gate_up[2i] and gate_up[2i + 1] whatever the row length.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/swiglu_math.h"

namespace ternion::cpu {

namespace {
constexpr i64 kMinParallelElements = 1 << 14;
}

template <class T>
void swiglu_forward(T* out, const T* gate_up, i64 n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) out[i] = swiglu_value(gate_up[2 * i], gate_up[2 * i + 1]);
}

template <class T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, i64 n) {
  // dgate_up may alias gate_up: each pair is read, then written, by one iteration.
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) {
    T dgate, dup;
    swiglu_gradient(gate_up[2 * i], gate_up[2 * i + 1], dout[i], dgate, dup);
    dgate_up[2 * i] = dgate;
    dgate_up[2 * i + 1] = dup;
  }
}

template void swiglu_forward<float>(float*, const float*, i64);
template void swiglu_forward<double>(double*, const double*, i64);
template void swiglu_backward<float>(float*, const float*, const float*, i64);
template void swiglu_backward<double>(double*, const double*, const double*, i64);

}  // namespace ternion::cpu
