// Optimizer updates, elementwise over one parameter's flat value, gradient and state.
//
// AdamW (Loshchilov & Hutter): with g = grad * grad_scale (grad_scale folds in clipping),
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   param -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * param)
// SGD with momentum (PyTorch's form, decoupled-free): g += weight_decay * param;
//   buf = momentum * buf + g;  param -= lr * buf
#pragma once

#include <cstdint>

#include <vector>

#include "framework/tensor.h"

namespace ternion {

struct AdamWHyper {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
  std::int64_t step = 1;  // 1-based, for bias correction
};

struct SgdHyper {
  float lr = 0.0f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
};

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h);

// One tensor of a multi-tensor AdamW step: its operands and its own weight decay (the
// hyper-parameters' weight_decay is ignored by adamw_update_many).
struct AdamWTensors {
  Tensor param, grad, m, v;
  float weight_decay = 0.0f;
};
// Every tensor's update with one set of hyper-parameters; on CUDA one launch for all
// (multi-tensor apply), on CPU a loop of adamw_update. All on one device.
void adamw_update_many(std::vector<AdamWTensors>& tensors, const AdamWHyper& h);
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h);

}  // namespace ternion
