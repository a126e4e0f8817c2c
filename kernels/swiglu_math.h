// SwiGLU's scalar math, shared by the CPU loop and the CUDA kernel.
//
//   swiglu(g, u) = silu(g) u,  silu(g) = g s,  s = sigmoid(g) = 1 / (1 + e),  e = exp(-g)
//   d/dg = u silu'(g),  silu'(g) = s (1 + g (1 - s)),      d/du = silu(g)
// 1 - s is taken as e s, which stays accurate where s rounds to 1 (the float 1 - s would lose
// every digit there). e is clamped at exp(80), as GELU's (gelu_math.h), so that it stays finite,
// e s is never inf * 0 and 1 + e stays inside fast_divide's range; there s < 2e-35 and silu,
// silu' are zero to float precision anyway. On a GPU fast_exp and fast_divide are the
// special-function unit's (kernels/vector_math.h), so that the kernels stay memory-bound.
#pragma once

#include "framework/features.h"
#include "kernels/vector_math.h"

namespace ternion {

namespace swiglu_detail {
template <class T>
TN_HOST_DEVICE inline T exp_minus(T gate) {
  const T minus_gate = -gate;
  return fast_exp(minus_gate < static_cast<T>(80) ? minus_gate : static_cast<T>(80));
}
}  // namespace swiglu_detail

template <class T>
TN_HOST_DEVICE inline T swiglu_value(T gate, T up) {
  return fast_divide(gate, static_cast<T>(1) + swiglu_detail::exp_minus(gate)) * up;
}

// The gradients of swiglu(gate, up) times dout: dgate and dup.
template <class T>
TN_HOST_DEVICE inline void swiglu_gradient(T gate, T up, T dout, T& dgate, T& dup) {
  const T e = swiglu_detail::exp_minus(gate);
  const T s = fast_divide(static_cast<T>(1), static_cast<T>(1) + e);
  dgate = dout * up * (s * (static_cast<T>(1) + gate * (e * s)));
  dup = dout * (gate * s);
}

}  // namespace ternion
