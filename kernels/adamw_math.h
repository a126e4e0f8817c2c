// The per-element optimizer updates, shared by the CPU loop and the CUDA kernel (the formulas
// are in kernels/adamw.h). Bias corrections depend only on the step, so callers compute them
// once per tensor: bias_correction1 = 1 - beta1^step, bias_correction2 = 1 - beta2^step.
#pragma once

#include "framework/features.h"
#include "kernels/vector_math.h"

namespace ternion {

TN_HOST_DEVICE inline void adamw_element(float& param, float grad, float& m, float& v, float lr,
                                         float beta1, float beta2, float eps, float weight_decay,
                                         float grad_scale, float bias_correction1,
                                         float bias_correction2) {
  float g = grad * grad_scale;
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  float m_hat = m / bias_correction1;
  float v_hat = v / bias_correction2;
  param -= lr * (m_hat / (fast_sqrt(v_hat) + eps) + weight_decay * param);
}

TN_HOST_DEVICE inline void sgd_element(float& param, float grad, float& momentum_buffer, float lr,
                                       float momentum, float weight_decay, float grad_scale) {
  float g = grad * grad_scale + weight_decay * param;
  momentum_buffer = momentum * momentum_buffer + g;
  param -= lr * momentum_buffer;
}

}  // namespace ternion
