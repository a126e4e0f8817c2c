// GPU GEMM rates through kernels/matmul.h (cuBLASLt in a CUDA build): the ceiling that the
// training benchmarks' MFU is measured against, taken on the same machine in the same run.
//   bench_gemm [--quick] [--min-ms 40] [--cpu]
//
// First a correctness check of each dtype mode at a small shape against the CPU matmul (the
// same inputs, rounded to bf16 first where the GPU sees bf16): relative Frobenius error under
// 1e-5 for F32 results, 1e-2 for BF16 results. Then, per case, TFLOP/s = 2 M N K / time, with
// the time the median of 5 batches of back-to-back calls (each batch at least --min-ms long,
// after two warm-up calls), measured as steady_clock around the batch plus one
// device_synchronize: launch overhead is included, as it is in training.
//
// dtype modes: f32 (F32 in and out, F32 math: no TF32), bf16 (BF16 in and out, F32
// accumulation), bf16>f32 (BF16 in, F32 out with beta 1: the weight-gradient accumulation).
// Cases: squares (4096^3, 8192^3) and every GEMM of a training micro-batch of GPT-2 124M
// (16 x 1024 tokens, width 768) and of a 1.3B model (8 x 1024 tokens, width 2048, 24 layers):
// per linear layer y = x W^T, dx = dy W, dW += dy^T x; the LM head against the tied
// embedding. "step GEMMs" weights them by how often one micro-batch runs each and gives the
// rate a training step could reach on its GEMMs alone.
//
// Output lines the GPU check (scripts/gpu-check.sh) reads:
//   peak bf16: <TFLOP/s> TFLOP/s (<case>)      the best bf16 case
//   peak f32:  <TFLOP/s> TFLOP/s (<case>)
//   step GEMMs <model> bf16: <TFLOP/s> TFLOP/s
// --cpu times the CPU path instead (OpenBLAS; squares of 1024 and 2048 only, no checks): a
// comparison, and a way to run this program's own logic on a machine without a GPU.
// Exit status: 0, also where no GPU is usable (it says so); 1 if a check or a case failed.
//
// Build-agnostic: Tensor, matmul, convert and the device runtime only, so a CPU-only build
// compiles it too.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/device_timing.h"
#include "framework/device_runtime.h"
#include "framework/philox.h"
#include "framework/tensor.h"
#include "kernels/convert.h"
#include "kernels/matmul.h"

using namespace ternion;

namespace {

enum class Mode { F32, BF16, BF16ToF32 };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::F32: return "f32";
    case Mode::BF16: return "bf16";
    case Mode::BF16ToF32: return "bf16>f32";
  }
  return "?";
}
DType input_dtype(Mode mode) { return mode == Mode::F32 ? DType::F32 : DType::BF16; }
DType output_dtype(Mode mode) { return mode == Mode::BF16 ? DType::BF16 : DType::F32; }

struct GemmCase {
  std::string name;  // "gpt2 fc  x W^T"
  std::string model;  // "" for squares, else the model whose step it belongs to
  std::int64_t m, n, k;
  bool transpose_a, transpose_b;
  Mode mode;
  int per_micro_batch = 0;  // how many times one micro-batch runs it (for "step GEMMs")
};

// One linear layer's three GEMMs with `tokens` rows, in_features -> out_features, `count` of
// them per micro-batch. Forward and dx take bf16 outputs, dW accumulates into f32.
void add_linear(std::vector<GemmCase>& cases, const std::string& model, const std::string& layer,
                std::int64_t tokens, std::int64_t in, std::int64_t out, int count) {
  cases.push_back({model + " " + layer + " y = x W^T", model, tokens, out, in, false, true,
                   Mode::BF16, count});
  cases.push_back({model + " " + layer + " dx = dy W", model, tokens, in, out, false, false,
                   Mode::BF16, count});
  cases.push_back({model + " " + layer + " dW += dy^T x", model, out, in, tokens, true, false,
                   Mode::BF16ToF32, count});
}

// A transformer micro-batch's GEMMs: qkv, attention projection, MLP up and down per block;
// the LM head once (its weight is the tied token embedding, [vocab, width]).
void add_model(std::vector<GemmCase>& cases, const std::string& model, std::int64_t tokens,
               std::int64_t width, int layers, std::int64_t padded_vocab) {
  add_linear(cases, model, "qkv", tokens, width, 3 * width, layers);
  add_linear(cases, model, "attn proj", tokens, width, width, layers);
  add_linear(cases, model, "fc", tokens, width, 4 * width, layers);
  add_linear(cases, model, "mlp proj", tokens, 4 * width, width, layers);
  add_linear(cases, model, "lm head", tokens, width, padded_vocab, 1);
}

Tensor random_cpu(const Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = 2.0f * philox_uniform({seed, 11}, i) - 1.0f;
  return t;
}

// A device tensor of `dtype` filled with random values in [-1, 1): a 4M-value random pool,
// made once per dtype, copied over it tile by tile on the device (creating 800M values on the
// host would take longer than the whole benchmark). Never zeros: they run faster than data.
Tensor random_device(const Shape& shape, DType dtype, Device device) {
  static std::map<DType, Tensor> pools;
  constexpr std::int64_t kPool = std::int64_t{1} << 22;
  if (!pools.count(dtype)) {
    Tensor pool = random_cpu({kPool}, 1234).to(device);
    if (dtype != DType::F32) {
      Tensor converted = Tensor::empty({kPool}, dtype, device);
      convert(converted, pool);
      pool = converted;
    }
    pools[dtype] = pool;
  }
  const Tensor& pool = pools[dtype];
  Tensor t = Tensor::empty(shape, dtype, device);
  Tensor flat = t.view({t.numel()});
  for (std::int64_t start = 0; start < t.numel(); start += kPool) {
    const std::int64_t length = std::min(kPool, t.numel() - start);
    flat.slice(0, start, length).copy_from(pool.slice(0, 0, length));
  }
  return t;
}

// The GPU product against the CPU one on the same (rounded) inputs; true when close.
bool check_mode(Mode mode, Device gpu, bool transpose_a, bool transpose_b) {
  const std::int64_t m = 256, n = 320, k = 384;
  const Shape a_shape = transpose_a ? Shape{k, m} : Shape{m, k};
  const Shape b_shape = transpose_b ? Shape{n, k} : Shape{k, n};
  Tensor a = random_cpu(a_shape, 1), b = random_cpu(b_shape, 2), c = random_cpu({m, n}, 3);
  if (input_dtype(mode) == DType::BF16) {  // what the GPU sees: the inputs rounded to bf16
    Tensor a16 = Tensor::empty(a_shape, DType::BF16), b16 = Tensor::empty(b_shape, DType::BF16);
    convert(a16, a);
    convert(b16, b);
    a = as_f32(a16);
    b = as_f32(b16);
  }
  const float beta = mode == Mode::BF16ToF32 ? 1.0f : 0.0f;
  if (output_dtype(mode) == DType::BF16) {
    Tensor c16 = Tensor::empty({m, n}, DType::BF16);
    convert(c16, c);
    c = as_f32(c16);
  }
  Tensor reference = c.clone();
  matmul(reference, a, b, transpose_a, transpose_b, 1.0f, beta);

  auto on_gpu = [&](const Tensor& cpu, DType dtype) {
    Tensor f32 = cpu.to(gpu);
    if (dtype == DType::F32) return f32;
    Tensor converted = Tensor::empty(cpu.shape(), dtype, gpu);
    convert(converted, f32);
    return converted;
  };
  Tensor ga = on_gpu(a, input_dtype(mode)), gb = on_gpu(b, input_dtype(mode));
  // With beta 0 the output starts as NaN (cuBLAS reads no C then), so an element the GEMM
  // leaves unwritten fails the check; with beta 1 it starts as c.
  Tensor gc = on_gpu(beta == 0.0f ? Tensor::full({m, n}, std::nanf("")) : c, output_dtype(mode));
  matmul(gc, ga, gb, transpose_a, transpose_b, 1.0f, beta);
  device_synchronize(gpu);
  const std::vector<float> got = gc.to_vector(), want = reference.to_vector();
  double err = 0.0, norm = 0.0;
  bool finite = true;
  for (std::size_t i = 0; i < got.size(); ++i) {
    finite = finite && std::isfinite(got[i]);
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  const double relative = std::sqrt(err / norm);
  const double limit = output_dtype(mode) == DType::BF16 ? 1e-2 : 1e-5;
  const bool ok = finite && relative < limit;
  std::printf("check %-9s %lldx%lldx%lld a%s b%s  rel err %.2e (limit %.0e)  %s\n",
              mode_name(mode), (long long)m, (long long)n, (long long)k, transpose_a ? "^T" : "",
              transpose_b ? "^T" : "", relative, limit, ok ? "ok" : "FAIL");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, cpu = false;
  double min_batch_ms = 40.0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--quick") {
      quick = true;
    } else if (flag == "--cpu") {
      cpu = true;
    } else if (flag == "--min-ms" && i + 1 < argc) {
      min_batch_ms = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_gemm [--quick] [--min-ms MS] [--cpu]\n");
      return 2;
    }
  }
  if (!cpu && cuda_device_count() == 0) {
    std::printf("bench_gemm: no GPU to measure (%s): nothing to do\n",
                cuda_unavailable_reason().c_str());
    return 0;
  }
  const Device device = cpu ? Device::cpu() : init_cuda_device(0);

  int failures = 0;
  if (!cpu) {
    for (Mode mode : {Mode::F32, Mode::BF16, Mode::BF16ToF32})
      for (auto [ta, tb] :
           {std::pair{false, true}, std::pair{false, false}, std::pair{true, false}}) {
        try {
          if (!check_mode(mode, device, ta, tb)) ++failures;
        } catch (const std::exception& e) {
          std::printf("check %-9s FAIL: %s\n", mode_name(mode), e.what());
          ++failures;
        }
      }
  }

  std::vector<GemmCase> cases;
  for (std::int64_t s : cpu ? std::vector<std::int64_t>{1024, 2048}
                           : std::vector<std::int64_t>{4096, 8192}) {
    const std::string name = "square " + std::to_string(s) + "^3";
    cases.push_back({name, "", s, s, s, false, false, Mode::BF16});
    cases.push_back({name, "", s, s, s, false, false, Mode::F32});
  }
  if (!quick && !cpu) {
    add_model(cases, "gpt2", 16 * 1024, 768, 12, 50304);
    cases.push_back({"gpt2 qkv y = x W^T", "", 16 * 1024, 2304, 768, false, true, Mode::F32});
    add_model(cases, "1.3b", 8 * 1024, 2048, 24, 50304);
  }

  std::printf("%-28s %-9s %6s %6s %6s %10s %9s\n", "case", "dtype", "M", "N", "K", "ms",
              "TFLOP/s");
  std::map<std::string, std::pair<double, double>> step_totals;  // model -> (flops, seconds)
  std::map<Mode, std::pair<double, std::string>> peaks;           // mode -> (TFLOP/s, case)
  for (const GemmCase& c : cases) {
    try {
      Tensor a = random_device(c.transpose_a ? Shape{c.k, c.m} : Shape{c.m, c.k},
                               input_dtype(c.mode), device);
      Tensor b = random_device(c.transpose_b ? Shape{c.n, c.k} : Shape{c.k, c.n},
                               input_dtype(c.mode), device);
      Tensor out = random_device({c.m, c.n}, output_dtype(c.mode), device);
      const float beta = c.mode == Mode::BF16ToF32 ? 1.0f : 0.0f;
      const double seconds = bench::median_seconds_per_call(device, min_batch_ms / 1e3, [&] {
        matmul(out, a, b, c.transpose_a, c.transpose_b, 1.0f, beta);
      });
      const double flops = 2.0 * double(c.m) * double(c.n) * double(c.k);
      const double tflops = flops / seconds / 1e12;
      std::printf("%-28s %-9s %6lld %6lld %6lld %10.3f %9.2f\n", c.name.c_str(),
                  mode_name(c.mode), (long long)c.m, (long long)c.n, (long long)c.k,
                  seconds * 1e3, tflops);
      std::fflush(stdout);
      if (!c.model.empty()) {
        step_totals[c.model].first += flops * c.per_micro_batch;
        step_totals[c.model].second += seconds * c.per_micro_batch;
      }
      const Mode peak_mode = c.mode == Mode::F32 ? Mode::F32 : Mode::BF16;
      if (tflops > peaks[peak_mode].first)
        peaks[peak_mode] = {tflops, c.name + " " + mode_name(c.mode)};
    } catch (const std::exception& e) {
      std::printf("%-28s %-9s FAIL: %s\n", c.name.c_str(), mode_name(c.mode), e.what());
      ++failures;
    }
  }
  for (auto& [mode, peak] : peaks)
    if (peak.first > 0)
      std::printf("peak %s: %.1f TFLOP/s (%s)\n", mode_name(mode), peak.first, peak.second.c_str());
  for (auto& [model, total] : step_totals)
    std::printf("step GEMMs %s bf16: %.1f TFLOP/s (%.2f ms of GEMMs per micro-batch)\n",
                model.c_str(), total.first / total.second / 1e12, total.second * 1e3);
  if (failures > 0) std::printf("bench_gemm: %d check(s) or case(s) FAILED\n", failures);
  return failures > 0 ? 1 : 0;
}
