// AdamW and SGD-with-momentum updates, elementwise (the math is in kernels/adamw_math.h).
#include <cmath>

#include "kernels/adamw_math.h"
#include "kernels/cpu/cpu_kernels.h"

namespace ternion::cpu {

namespace {
constexpr i64 kMinParallelElements = 1 << 15;
}

void adamw_update(float* param, const float* grad, float* m, float* v, i64 n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float grad_scale, i64 step) {
  // Once per tensor, not per element.
  const auto bias_correction1 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step)));
  const auto bias_correction2 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step)));
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i)
    adamw_element(param[i], grad[i], m[i], v[i], lr, beta1, beta2, eps, weight_decay, grad_scale,
                  bias_correction1, bias_correction2);
}

void sgd_update(float* param, const float* grad, float* momentum_buffer, i64 n, float lr,
                float momentum, float weight_decay, float grad_scale) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i)
    sgd_element(param[i], grad[i], momentum_buffer[i], lr, momentum, weight_decay, grad_scale);
}

}  // namespace ternion::cpu
