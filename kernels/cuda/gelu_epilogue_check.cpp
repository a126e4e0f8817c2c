// cuda::gelu_epilogues_agree(features, inner): runs cuBLASLt's GELU epilogues once per GEMM
// shape on known inputs and compares them with GPT-2's tanh GELU (the tolerance is in
// kernels/gelu_epilogue_check.h). Per shape, because cuBLASLt picks its kernel by shape, and
// a small test GEMM could get another kernel family than the MLP's.
//
// The inputs make each GEMM an exact copy of a chosen value, so the epilogue alone is judged
// (kRows rows; features and inner are the MLP's, e.g. 3072 and 768 for GPT-2):
//   forward:  x [kRows, inner] has x[i][0] = t_i (bf16 values sweeping [-8, 8]), zeros
//             elsewhere; w [features, inner] has w[j][0] = 1; bias[j] = (j mod 16 - 8) / 32.
//             The F32 product plus bias is t_i + bias_j exactly, so out[i][j] should be
//             gelu(t_i + bias_j) rounded once and pre_activation that sum rounded to bf16;
//             without the bias (GELU_AUX), gelu(t_i).
//   backward: dy [kRows, inner] has dy[i][0] = s_i (1 or -0.75), w2 [inner, features] has
//             w2[0][j] = 1, so the product is s_i and dx[i][j] should be
//             s_i * gelu'(pre_activation[i][j]), on the forward's bf16 pre-activations.
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/logging.h"
#include "kernels/convert.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/gelu_epilogue_check.h"

namespace ternion::cuda {

namespace {

constexpr std::int64_t kRows = 1024;

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

std::vector<float> host_values(const Tensor& device_tensor) {
  return ::ternion::as_f32(device_tensor).to(Device::cpu()).to_vector();
}

std::string describe(const GeluDeviation& d) {
  return detail::concat(d.worst, " tolerances at x = ", d.x, " (", d.got, " for ", d.want, ")");
}

struct Verdict {
  bool agree = false;
  std::string detail;
};

Verdict check_epilogues(std::int64_t features, std::int64_t inner) {
  std::vector<float> x(kRows * inner, 0.0f), w(features * inner, 0.0f), bias(features);
  std::vector<double> sweep(kRows), offset(features), scale(kRows);
  for (std::int64_t i = 0; i < kRows; ++i) {
    sweep[i] = rounded_to_bf16(-8.0 + 16.0 * static_cast<double>(i) / (kRows - 1));
    x[i * inner] = static_cast<float>(sweep[i]);
    scale[i] = i % 2 == 0 ? 1.0 : -0.75;
  }
  for (std::int64_t j = 0; j < features; ++j) {
    offset[j] = static_cast<double>(j % 16 - 8) / 32.0;
    bias[j] = static_cast<float>(offset[j]);
    w[j * inner] = 1.0f;
  }
  const Tensor x_dev = device_bf16(x, {kRows, inner});
  const Tensor w_dev = device_bf16(w, {features, inner});
  const Tensor bias_dev = device_bf16(bias, {features});
  const Device device = x_dev.device();
  Tensor out = Tensor::empty({kRows, features}, DType::BF16, device);
  Tensor pre = Tensor::empty({kRows, features}, DType::BF16, device);
  Tensor out_no_bias = Tensor::empty({kRows, features}, DType::BF16, device);
  Tensor pre_no_bias = Tensor::empty({kRows, features}, DType::BF16, device);
  if (!matmul_bias_gelu(out, pre, x_dev, w_dev, &bias_dev))
    return {false, "cuBLASLt offers no algorithm for GELU_AUX_BIAS here"};
  if (!matmul_bias_gelu(out_no_bias, pre_no_bias, x_dev, w_dev, nullptr))
    return {false, "cuBLASLt offers no algorithm for GELU_AUX here"};

  std::vector<float> dy(kRows * inner, 0.0f), w2(inner * features, 0.0f);
  for (std::int64_t i = 0; i < kRows; ++i) dy[i * inner] = static_cast<float>(scale[i]);
  for (std::int64_t j = 0; j < features; ++j) w2[j] = 1.0f;  // row 0 of [inner, features]
  const Tensor dy_dev = device_bf16(dy, {kRows, inner});
  const Tensor w2_dev = device_bf16(w2, {inner, features});
  Tensor dx = Tensor::empty({kRows, features}, DType::BF16, device);
  if (!matmul_dgelu(dx, dy_dev, w2_dev, pre))
    return {false, "cuBLASLt offers no algorithm for DGELU here"};

  // Reading back synchronises the device.
  const std::vector<float> got_out = host_values(out), got_pre = host_values(pre),
                           got_out_no_bias = host_values(out_no_bias),
                           got_pre_no_bias = host_values(pre_no_bias), got_dx = host_values(dx);
  GeluDeviation forward, forward_no_bias, saved, backward;
  for (std::int64_t i = 0; i < kRows; ++i) {
    for (std::int64_t j = 0; j < features; ++j) {
      const std::size_t e = static_cast<std::size_t>(i * features + j);
      const double at = sweep[i] + offset[j];  // exact in double and in F32
      forward.observe(at, got_out[e], gelu_tanh_reference(at));
      saved.observe(at, got_pre[e], at);
      saved.observe(sweep[i], got_pre_no_bias[e], sweep[i]);
      forward_no_bias.observe(sweep[i], got_out_no_bias[e], gelu_tanh_reference(sweep[i]));
      backward.observe(got_pre[e], got_dx[e],
                       scale[i] * gelu_tanh_derivative_reference(got_pre[e]));
    }
  }
  const std::string detail = "forward " + describe(forward) + "; without bias " +
                             describe(forward_no_bias) + "; pre-activation " +
                             describe(saved) + "; backward " + describe(backward);
  return {forward.agrees() && forward_no_bias.agrees() && saved.agrees() && backward.agrees(),
          "largest deviation from GPT-2's tanh GELU: " + detail};
}

}  // namespace

bool gelu_epilogues_agree(std::int64_t features, std::int64_t inner) {
  static std::mutex mutex;
  static std::map<std::pair<std::int64_t, std::int64_t>, bool> verdicts;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(features, inner);
  if (auto found = verdicts.find(key); found != verdicts.end()) return found->second;
  // Shapes the epilogues cannot take (matmul_bias_gelu's rules) need no check and no log line.
  if (features <= 0 || inner <= 0 || features % 8 != 0) {
    verdicts.emplace(key, false);
    return false;
  }
  Verdict verdict;
  {
    try {
      verdict = check_epilogues(features, inner);
    } catch (const std::exception& e) {  // e.g. a cuBLASLt status: the separate kernels remain
      verdict = {false, std::string("the check failed: ") + e.what()};
    }
  }
  verdicts.emplace(key, verdict.agree);
  const std::string line =
      detail::concat("cuBLASLt GELU epilogues for ", features, " features from ", inner,
                     " inputs: ", verdict.agree ? "agree with" : "differ from",
                     " GPT-2's GELU (training.gelu_epilogue: check uses them only if they agree)",
                     "; ", verdict.detail);
  // Every rank says so where they differ: a rank that differs would be invisible on rank 0's
  // log alone.
  if (verdict.agree) {
    log_info(line);
  } else {
    log_line(line);
  }
  return verdict.agree;
}

}  // namespace ternion::cuda
