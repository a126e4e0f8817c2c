// A linear layer's forward, fused (kernels/linear.h: the bias, and in bf16 the GELU where
// cuda::gelu_epilogues_agree(), as cuBLASLt's epilogue) against the unfused kernels (matmul,
// bias_add_forward, gelu_forward), on the GPU, for GPT-2 124M's linear layers over one
// micro-batch (16 x 1024 tokens, width 768):
//   bench_linear [--min-ms 40] [--rows N]
//
// Per case: whether cuBLASLt took the bias and GELU epilogue ("bias+gelu"), the bias epilogue
// ("fused") or linear_forward fell back ("fallback"); the relative Frobenius difference of the two
// outputs (limit 1e-2 in bf16, 1e-5 in f32); and the median ms per call of each (5 batches of
// back-to-back calls, each at least --min-ms, after two warm-ups; launch overhead included), with
// the time saved. Then cuBLASLt's GELU epilogues alone (forward GELU_AUX_BIAS, backward DGELU)
// against the separate kernels at GPT-2's MLP shape, whatever the run-time check decided. Exit
// status: 0, also where no GPU is usable (it says so); 1 if a check or a case failed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/device_timing.h"
#include "framework/device_runtime.h"
#include "framework/features.h"
#include "framework/philox.h"
#include "framework/tensor.h"
#include "kernels/bias_add.h"
#include "kernels/convert.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/matmul.h"
#if TN_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

using namespace ternion;

namespace {


struct LinearCase {
  std::string name;
  std::int64_t in, out;
  LinearActivation activation;
  DType dtype;
};

// Values in [-1, 1) on the device in `dtype`.
Tensor random_device(const Shape& shape, DType dtype, Device device, std::uint64_t seed) {
  Tensor host = Tensor::empty(shape);
  float* p = host.data<float>();
  for (std::int64_t i = 0; i < host.numel(); ++i)
    p[i] = 2.0f * philox_uniform({seed, 13}, i) - 1.0f;
  Tensor f32 = host.to(device);
  if (dtype == DType::F32) return f32;
  Tensor converted = Tensor::empty(shape, dtype, device);
  convert(converted, f32);
  return converted;
}

double relative_difference(const Tensor& got, const Tensor& want) {
  const std::vector<float> g = as_f32(got).to_vector(), w = as_f32(want).to_vector();
  double err = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i])) return INFINITY;
    err += (double(g[i]) - w[i]) * (double(g[i]) - w[i]);
    norm += double(w[i]) * w[i];
  }
  return std::sqrt(err / std::max(norm, 1e-30));
}

}  // namespace

int main(int argc, char** argv) {
  double min_batch_ms = 40.0;
  std::int64_t rows = 16 * 1024;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--min-ms" && i + 1 < argc) {
      min_batch_ms = std::atof(argv[++i]);
    } else if (flag == "--rows" && i + 1 < argc) {
      rows = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_linear [--min-ms MS] [--rows N]\n");
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::printf("bench_linear: no GPU to measure (%s): nothing to do\n",
                cuda_unavailable_reason().c_str());
    return 0;
  }
  const Device device = init_cuda_device(0);
  const auto none = LinearActivation::none, gelu = LinearActivation::gelu;
  const std::vector<LinearCase> cases = {
      {"gpt2 qkv", 768, 3 * 768, none, DType::BF16},
      {"gpt2 attn proj", 768, 768, none, DType::BF16},
      {"gpt2 fc + gelu", 768, 4 * 768, gelu, DType::BF16},
      {"gpt2 fc + gelu", 768, 4 * 768, gelu, DType::F32},
      {"odd width + gelu", 768, 3001, gelu, DType::BF16},  // n not a multiple of 8
  };

  std::printf("%-18s %-5s %6s %5s %5s %-9s %9s %10s %10s %7s\n", "case", "dtype", "rows", "in",
              "out", "path", "rel diff", "fused ms", "unfused ms", "saved");
  int failures = 0;
  for (const LinearCase& c : cases) {
    const char* dtype = c.dtype == DType::BF16 ? "bf16" : "f32";
    try {
      const Tensor x = random_device({rows, c.in}, c.dtype, device, 1);
      const Tensor w = random_device({c.out, c.in}, c.dtype, device, 2);
      const Tensor bias = random_device({c.out}, c.dtype, device, 3);
      Tensor out = Tensor::empty({rows, c.out}, c.dtype, device);
      Tensor pre = Tensor::empty({rows, c.out}, c.dtype, device);
      Tensor unfused_out = Tensor::empty({rows, c.out}, c.dtype, device);
      Tensor unfused_pre = Tensor::empty({rows, c.out}, c.dtype, device);
      const bool with_gelu = c.activation == gelu;
      const char* path = "?";
#if TN_HAVE_CUDA
      if (with_gelu && c.dtype == DType::BF16 && cuda::gelu_epilogues_agree(c.out, c.in) &&
          cuda::matmul_bias_gelu(out, pre, x, w, &bias)) {
        path = "bias+gelu";
      } else {
        path = cuda::matmul_bias(with_gelu ? pre : out, x, w, bias) ? "fused" : "fallback";
      }
#endif
      auto fused = [&] {
        linear_forward(out, with_gelu ? &pre : nullptr, x, w, &bias, c.activation);
      };
      auto unfused = [&] {
        Tensor& affine = with_gelu ? unfused_pre : unfused_out;
        matmul(affine, x, w, false, true);
        bias_add_forward(affine, bias);
        if (with_gelu) gelu_forward(unfused_out, unfused_pre);
      };
      fused();
      unfused();
      device_synchronize(device);
      const double diff = relative_difference(out, unfused_out);
      const double limit = c.dtype == DType::BF16 ? 1e-2 : 1e-5;
      const double fused_s = bench::median_seconds_per_call(device, min_batch_ms / 1e3, fused);
      const double unfused_s = bench::median_seconds_per_call(device, min_batch_ms / 1e3, unfused);
      const bool ok = diff < limit;
      std::printf("%-18s %-5s %6lld %5lld %5lld %-9s %9.2e %10.3f %10.3f %6.1f%%%s\n",
                  c.name.c_str(), dtype, (long long)rows, (long long)c.in, (long long)c.out,
                  path, diff, fused_s * 1e3, unfused_s * 1e3,
                  100.0 * (unfused_s - fused_s) / unfused_s, ok ? "" : "  FAIL (rel diff)");
      std::fflush(stdout);
      if (!ok) ++failures;
    } catch (const std::exception& e) {
      std::printf("%-18s %-5s FAIL: %s\n", c.name.c_str(), dtype, e.what());
      ++failures;
    }
  }
#if TN_HAVE_CUDA
  // cuBLASLt's GELU epilogues timed directly, whatever the run-time check decided (its verdict
  // is printed with them): what the MLP gains if they are used, or would gain if the check's
  // tolerance were relaxed. Forward: GELU_AUX_BIAS against matmul + bias_add + gelu; backward:
  // DGELU against matmul + gelu_backward, with their results' relative differences.
  try {
    const std::int64_t width = 768, ff = 4 * width;
    const bool agree = cuda::gelu_epilogues_agree(ff, width);
    const Tensor x = random_device({rows, width}, DType::BF16, device, 4);
    const Tensor w = random_device({ff, width}, DType::BF16, device, 5);
    const Tensor bias = random_device({ff}, DType::BF16, device, 6);
    const Tensor w_proj = random_device({width, ff}, DType::BF16, device, 7);
    Tensor out = Tensor::empty({rows, ff}, DType::BF16, device), pre = out.clone();
    Tensor want_out = out.clone(), want_pre = out.clone();
    Tensor dx = out.clone(), want_dx = out.clone();
    auto forward_fused = [&] {
      if (!cuda::matmul_bias_gelu(out, pre, x, w, &bias))
        throw std::runtime_error("no GELU_AUX_BIAS algorithm");
    };
    auto forward_separate = [&] {
      matmul(want_pre, x, w, false, true);
      bias_add_forward(want_pre, bias);
      gelu_forward(want_out, want_pre);
    };
    auto backward_fused = [&] {
      if (!cuda::matmul_dgelu(dx, x, w_proj, want_pre))
        throw std::runtime_error("no DGELU algorithm");
    };
    auto backward_separate = [&] {
      matmul(want_dx, x, w_proj, false, false);
      gelu_backward(want_dx, want_pre, want_dx);
    };
    forward_fused();
    forward_separate();
    backward_fused();
    backward_separate();
    device_synchronize(device);
    std::printf("cuBLASLt GELU epilogues at %lld x %lld (the check: %s GPT-2's GELU):\n",
                (long long)ff, (long long)width, agree ? "agree with" : "differ from");
    const double f_fused =
        bench::median_seconds_per_call(device, min_batch_ms / 1e3, forward_fused);
    const double f_sep =
        bench::median_seconds_per_call(device, min_batch_ms / 1e3, forward_separate);
    const double b_fused =
        bench::median_seconds_per_call(device, min_batch_ms / 1e3, backward_fused);
    const double b_sep =
        bench::median_seconds_per_call(device, min_batch_ms / 1e3, backward_separate);
    std::printf("  forward  GELU_AUX_BIAS %8.3f ms, separate %8.3f ms, rel diff %.2e\n",
                f_fused * 1e3, f_sep * 1e3, relative_difference(out, want_out));
    std::printf("  backward DGELU         %8.3f ms, separate %8.3f ms, rel diff %.2e\n",
                b_fused * 1e3, b_sep * 1e3, relative_difference(dx, want_dx));
  } catch (const std::exception& e) {
    std::printf("cuBLASLt GELU epilogues: not timed: %s\n", e.what());
  }
#endif
  if (failures > 0) std::printf("bench_linear: %d case(s) FAILED\n", failures);
  return failures > 0 ? 1 : 0;
}
