// cuda::gelu_epilogues_agree(): runs cuBLASLt's GELU epilogues once on known inputs and
// compares them with GPT-2's tanh GELU (kernels/gelu_epilogue_check.h has the tolerance).
//
// The inputs make each GEMM an exact copy of a chosen value, so the epilogue alone is judged:
//   forward:  x [rows, kInner] has x[i][0] = t_i (bf16 values sweeping [-8, 8]), zeros elsewhere;
//             w [kFeatures, kInner] has w[j][0] = 1; bias[j] = (j mod 16 - 8) / 32. The F32
//             product plus bias is t_i + bias_j exactly, so out[i][j] should be
//             gelu(t_i + bias_j) rounded once, and pre_activation that sum rounded to bf16.
//   backward: dy [rows, kInner] has dy[i][0] = s_i (1 or -0.75), w2 [kInner, kFeatures] has
//             w2[0][j] = 1, so the product is s_i and dx[i][j] should be
//             s_i * gelu'(pre_activation[i][j]), on the forward's bf16 pre-activations.
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/logging.h"
#include "kernels/convert.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/gelu_epilogue_check.h"

namespace ternion::cuda {

namespace {

constexpr std::int64_t kRows = 1024, kFeatures = 64, kInner = 16;

double rounded_to_bf16(double value) {
  return bf16_to_float(float_to_bf16(static_cast<float>(value)));
}

// A BF16 tensor on the current device holding `values` (row-major `shape`).
Tensor device_bf16(const std::vector<float>& values, const Shape& shape) {
  const Tensor host = Tensor::from_vector(values, shape);
  const Tensor on_device = host.to(Device::cuda(current_device()));
  Tensor bf16 = Tensor::empty(shape, DType::BF16, on_device.device());
  ::ternion::convert(bf16, on_device);
  return bf16;
}

std::vector<double> host_values(const Tensor& device_tensor) {
  const std::vector<float> values = ::ternion::as_f32(device_tensor).to(Device::cpu()).to_vector();
  return std::vector<double>(values.begin(), values.end());
}

std::string describe(const GeluDeviation& d) {
  return detail::concat(d.worst, " tolerances at x = ", d.x, " (", d.got, " for ", d.want, ")");
}

struct Verdict {
  bool agree = false;
  std::string detail;
};

Verdict check_epilogues() {
  std::vector<float> x(kRows * kInner, 0.0f), w(kFeatures * kInner, 0.0f), bias(kFeatures);
  std::vector<double> sweep(kRows), offset(kFeatures), scale(kRows);
  for (std::int64_t i = 0; i < kRows; ++i) {
    sweep[i] = rounded_to_bf16(-8.0 + 16.0 * static_cast<double>(i) / (kRows - 1));
    x[i * kInner] = static_cast<float>(sweep[i]);
    scale[i] = i % 2 == 0 ? 1.0 : -0.75;
  }
  for (std::int64_t j = 0; j < kFeatures; ++j) {
    offset[j] = static_cast<double>(j % 16 - 8) / 32.0;
    bias[j] = static_cast<float>(offset[j]);
    w[j * kInner] = 1.0f;
  }
  const Tensor x_dev = device_bf16(x, {kRows, kInner});
  const Tensor w_dev = device_bf16(w, {kFeatures, kInner});
  const Tensor bias_dev = device_bf16(bias, {kFeatures});
  const Device device = x_dev.device();
  Tensor out = Tensor::empty({kRows, kFeatures}, DType::BF16, device);
  Tensor pre = Tensor::empty({kRows, kFeatures}, DType::BF16, device);
  if (!matmul_bias_gelu(out, pre, x_dev, w_dev, &bias_dev))
    return {false, "cuBLASLt offers no algorithm for GELU_AUX_BIAS on this device"};

  std::vector<float> dy(kRows * kInner, 0.0f), w2(kInner * kFeatures, 0.0f);
  for (std::int64_t i = 0; i < kRows; ++i) dy[i * kInner] = static_cast<float>(scale[i]);
  for (std::int64_t j = 0; j < kFeatures; ++j) w2[j] = 1.0f;  // row 0 of [kInner, kFeatures]
  const Tensor dy_dev = device_bf16(dy, {kRows, kInner});
  const Tensor w2_dev = device_bf16(w2, {kInner, kFeatures});
  Tensor dx = Tensor::empty({kRows, kFeatures}, DType::BF16, device);
  if (!matmul_dgelu(dx, dy_dev, w2_dev, pre))
    return {false, "cuBLASLt offers no algorithm for DGELU on this device"};

  const std::vector<double> got_out = host_values(out), got_pre = host_values(pre),
                            got_dx = host_values(dx);  // synchronises the device
  const std::size_t n = got_out.size();
  std::vector<double> at(n), want_out(n), want_pre(n), at_pre(n), want_dx(n);
  for (std::int64_t i = 0; i < kRows; ++i) {
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      const std::size_t e = static_cast<std::size_t>(i * kFeatures + j);
      at[e] = sweep[i] + offset[j];  // exact in double and in F32
      want_out[e] = gelu_tanh_reference(at[e]);
      want_pre[e] = at[e];
      at_pre[e] = got_pre[e];
      want_dx[e] = scale[i] * gelu_tanh_derivative_reference(got_pre[e]);
    }
  }
  const GeluDeviation forward = worst_gelu_deviation(at, got_out, want_out);
  const GeluDeviation saved = worst_gelu_deviation(at, got_pre, want_pre);
  const GeluDeviation backward = worst_gelu_deviation(at_pre, got_dx, want_dx);
  const std::string detail = "forward " + describe(forward) + "; pre-activation " +
                             describe(saved) + "; backward " + describe(backward);
  return {forward.agrees() && saved.agrees() && backward.agrees(),
          "largest deviation from GPT-2's tanh GELU: " + detail};
}

}  // namespace

bool gelu_epilogues_agree() {
  static std::once_flag once;
  static bool agree = false;
  std::call_once(once, [] {
    Verdict verdict;
    try {
      verdict = check_epilogues();
    } catch (const Error& e) {  // a cuBLASLt status: no fusion, the separate kernels remain
      verdict = {false, std::string("the check failed: ") + e.what()};
    }
    agree = verdict.agree;
    log_info("cuBLASLt GELU epilogues: ",
             agree ? "used for bf16 MLPs" : "not used (the separate GELU kernels run)", "; ",
             verdict.detail);
  });
  return agree;
}

}  // namespace ternion::cuda
