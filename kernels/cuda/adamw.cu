// Optimizer updates on the GPU (contract in kernels/adamw.h): adamw_math.h's adamw_element and
// sgd_element, the CPU's functions, on F32 parameters, gradients and state.
//
// adamw_update_many is a multi-tensor apply: the host writes a table of the tensors (pointers,
// numel, weight decay, first chunk), copies it through pinned memory (multi_tensor.cuh) into a
// device buffer on the compute stream and launches one grid of one block per chunk of kChunk
// elements; each block finds its tensor by binary search over the first chunks and updates its
// slice. Bias corrections are computed once on the host, as the CPU computes them, so each
// element's arithmetic is the single-tensor kernel's.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/adamw_math.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/multi_tensor.cuh"

namespace ternion::cuda {

namespace {

using detail::grid_start;
using detail::grid_stride;
using detail::kThreads;

constexpr long long kChunk = 1 << 16;  // elements per block of the multi-tensor kernel

// The per-step constants every element uses.
struct AdamWConstants {
  float lr, beta1, beta2, eps, grad_scale, bias_correction1, bias_correction2;
};

AdamWConstants adamw_constants(const AdamWHyper& h) {
  // As kernels/cpu/adamw.cpp: once per step, in double, rounded to float.
  const auto bias_correction1 = static_cast<float>(
      1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step)));
  const auto bias_correction2 = static_cast<float>(
      1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step)));
  return {h.lr, h.beta1, h.beta2, h.eps, h.grad_scale, bias_correction1, bias_correction2};
}

__device__ inline void adamw_at(float* param, const float* grad, float* m, float* v,
                                long long i, float weight_decay, const AdamWConstants& k) {
  float p = param[i], m_i = m[i], v_i = v[i];
  adamw_element(p, grad[i], m_i, v_i, k.lr, k.beta1, k.beta2, k.eps, weight_decay, k.grad_scale,
                k.bias_correction1, k.bias_correction2);
  param[i] = p;
  m[i] = m_i;
  v[i] = v_i;
}

__global__ void adamw_kernel(float* __restrict__ param, const float* __restrict__ grad,
                             float* __restrict__ m, float* __restrict__ v, long long n,
                             float weight_decay, AdamWConstants k) {
  for (long long i = grid_start(); i < n; i += grid_stride())
    adamw_at(param, grad, m, v, i, weight_decay, k);
}

// One row of the multi-tensor table. Tensors with no elements are left out of the table.
struct AdamWTableEntry {
  float* param;
  const float* grad;
  float* m;
  float* v;
  long long numel;
  long long first_chunk;  // chunks of earlier entries; strictly increasing along the table
  float weight_decay;
};

__global__ void adamw_many_kernel(const AdamWTableEntry* __restrict__ table, int n_entries,
                                  AdamWConstants k) {
  const long long chunk = blockIdx.x;
  const AdamWTableEntry entry = table[detail::entry_of_chunk(table, n_entries, chunk)];
  const long long begin = (chunk - entry.first_chunk) * kChunk;
  const long long end = begin + kChunk < entry.numel ? begin + kChunk : entry.numel;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x)
    adamw_at(entry.param, entry.grad, entry.m, entry.v, i, entry.weight_decay, k);
}

__global__ void sgd_kernel(float* __restrict__ param, const float* __restrict__ grad,
                           float* __restrict__ momentum_buffer, long long n, float lr,
                           float momentum, float weight_decay, float grad_scale) {
  for (long long i = grid_start(); i < n; i += grid_stride()) {
    float p = param[i], buffer = momentum_buffer[i];
    sgd_element(p, grad[i], buffer, lr, momentum, weight_decay, grad_scale);
    param[i] = p;
    momentum_buffer[i] = buffer;
  }
}

}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h) {
  cudaStream_t stream = compute_stream();
  const long long n = param.numel();
  if (n == 0) return;
  adamw_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(
      param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n,
      h.weight_decay, adamw_constants(h));
  TN_CUDA_CHECK_LAUNCH();
}

void adamw_update_many(std::vector<AdamWTensors>& tensors, const AdamWHyper& h) {
  cudaStream_t stream = compute_stream();
  std::vector<AdamWTableEntry> table;
  table.reserve(tensors.size());
  long long chunks = 0;
  for (AdamWTensors& t : tensors) {
    const long long n = t.param.numel();
    if (n == 0) continue;
    table.push_back({t.param.data<float>(), t.grad.data<float>(), t.m.data<float>(),
                     t.v.data<float>(), n, chunks, t.weight_decay});
    chunks += (n + kChunk - 1) / kChunk;
  }
  if (table.empty()) return;
  const detail::DeviceTable<AdamWTableEntry> device_table(table, chunks,
                                                          tensors.front().param.device(), stream,
                                                          "adamw_update_many");
  adamw_many_kernel<<<device_table.grid(), kThreads, 0, stream>>>(
      device_table.entries(), device_table.size(), adamw_constants(h));
  TN_CUDA_CHECK_LAUNCH();
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h) {
  cudaStream_t stream = compute_stream();
  const long long n = param.numel();
  if (n == 0) return;
  sgd_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(
      param.data<float>(), grad.data<float>(), momentum_buffer.data<float>(), n, h.lr,
      h.momentum, h.weight_decay, h.grad_scale);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace ternion::cuda
