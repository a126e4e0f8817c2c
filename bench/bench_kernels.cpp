// Per-op timings at GPT-2 124M shapes, to see where a training step's time goes beside the
// GEMMs, on the CPU (default: batch 4 x 64 tokens, f32) or the GPU (GPT-2's micro-batch of
// 16 x 1024 tokens in bf16 is `--device cuda --dtype bf16 --batch 16 --seq 1024`):
//   bench_kernels [--device cpu|cuda] [--dtype f32|bf16] [--batch 4] [--seq 64] [--width 768]
//                 [--heads 12] [--vocab 50304] [--threads N]
// Each op runs once to warm up, then in batches of back-to-back calls with one device
// synchronisation each (best_seconds); the best time per call is printed with its GFLOP/s (GEMMs,
// attention) or its effective memory bandwidth (everything else: the bytes the op must read and
// write / time, so a fused op's figure counts only its own traffic). Fused ops are timed beside the
// unfused sequence they replace. The percentages say how far each memory-bound op is from a
// yardstick measured in the same run: on the CPU a streaming triad over arrays far larger
// than the caches (a[i] = b[i] * s + c[i], the threads the kernels use), on the GPU a plain
// device-to-device copy. An op whose data fits in cache can pass 100%.
// Exit status: 0; with --device cuda and no GPU it says so and exits 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/cpu_info.h"
#include "framework/device_runtime.h"
#include "framework/philox.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/bias_add.h"
#include "kernels/convert.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layer_norm.h"
#include "kernels/linear.h"
#include "kernels/matmul.h"
#include "kernels/rms_norm.h"
#include "kernels/rotary_qkv.h"
#include "kernels/swiglu.h"
#include "kernels/threads.h"

using namespace ternion;

namespace {

Device g_device = Device::cpu();
DType g_dtype = DType::F32;
double g_yardstick_bandwidth = 0.0;  // bytes/s: the CPU's triad or the GPU's copy
const char* g_yardstick_name = "triad";

// The best of `repeats` batches, per call. A batch runs the op back to back (about 2 ms of
// calls) and synchronises once, so a short kernel's launch latency and the synchronisation
// are spread over the batch, as in training, where the launch queue stays full: a single
// call timed with its own synchronisation added ~10 us, a third of a LayerNorm's time.
double best_seconds(const std::function<void()>& op, int repeats = 5) {
  const auto per_call = [&](int calls) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) op();
    device_synchronize(g_device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
  };
  per_call(1);  // warm-up
  const double single = per_call(1);
  const int calls = static_cast<int>(std::clamp(2e-3 / single, 1.0, 200.0));
  double best = single;
  for (int r = 0; r < repeats; ++r) best = std::min(best, per_call(calls));
  return best;
}

// A tensor of small normal values in `dtype` on the benchmark's device.
Tensor random(const Shape& shape, std::uint64_t seed, DType dtype = g_dtype) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = philox_normal({seed, 7}, i) * 0.1f;
  if (dtype != DType::F32) {
    Tensor converted = Tensor::empty(shape, dtype);
    convert(converted, t);
    t = converted;
  }
  return t.to(g_device);
}
Tensor empty(const Shape& shape, DType dtype = g_dtype) {
  return Tensor::empty(shape, dtype, g_device);
}
Tensor zeros(const Shape& shape) { return Tensor::zeros(shape, DType::F32, g_device); }
Tensor on_device_ints(const std::vector<std::int32_t>& values, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::I32);
  std::copy(values.begin(), values.end(), t.data<std::int32_t>());
  return t.to(g_device);
}

void report_flops(const char* name, double seconds, double flops) {
  std::printf("%-44s %9.3f ms  %8.1f GFLOP/s\n", name, seconds * 1e3, flops / seconds / 1e9);
}
void report_bytes(const char* name, double seconds, double bytes) {
  const double rate = bytes / seconds;
  std::printf("%-44s %9.3f ms  %8.1f GB/s  %5.1f%% of %s\n", name, seconds * 1e3, rate / 1e9,
              100.0 * rate / g_yardstick_bandwidth, g_yardstick_name);
}

// STREAM's triad, written plainly (no kernel of ours): what the CPU's memory system streams
// with these threads. 3 x 128 MiB, so no level of cache holds it.
double cpu_triad_bandwidth() {
  const std::int64_t n = std::int64_t{1} << 25;
  std::vector<float> a(static_cast<std::size_t>(n)), b(a.size(), 1.0f), c(a.size(), 2.0f);
  float* pa = a.data();
  const float* pb = b.data();
  const float* pc = c.data();
  const double seconds = best_seconds([&] {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) pa[i] = pb[i] * 0.5f + pc[i];
  }, 10);  // more repeats than the ops get: the yardstick must not be a slow sample
  return 3.0 * 4.0 * static_cast<double>(n) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t batch = 4, seq = 64, width = 768, heads = 12, vocab = 50304, threads = 0;
  std::string device_name = "cpu", dtype_name_arg = "f32";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    const std::int64_t v = std::atoll(value.c_str());
    if (flag == "--batch")
      batch = v;
    else if (flag == "--seq")
      seq = v;
    else if (flag == "--width")
      width = v;
    else if (flag == "--heads")
      heads = v;
    else if (flag == "--vocab")
      vocab = v;
    else if (flag == "--threads")
      threads = v;
    else if (flag == "--device")
      device_name = value;
    else if (flag == "--dtype")
      dtype_name_arg = value;
    else {
      std::fprintf(stderr, "bench_kernels: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if ((device_name != "cpu" && device_name != "cuda") ||
      (dtype_name_arg != "f32" && dtype_name_arg != "bf16") || argc % 2 == 0) {
    std::fprintf(stderr,
                 "bench_kernels: --device takes cpu or cuda, --dtype f32 or bf16, each "
                 "flag one value\n");
    return 2;
  }
  if (device_name == "cuda") {
    if (cuda_device_count() == 0) {
      std::printf("bench_kernels: no GPU to measure (%s): nothing to do\n",
                  cuda_unavailable_reason().c_str());
      return 0;
    }
    g_device = init_cuda_device(0);
  }
  g_dtype = dtype_name_arg == "bf16" ? DType::BF16 : DType::F32;
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const double es = static_cast<double>(dtype_size(g_dtype));  // bytes per activation element
  const std::int64_t rows = batch * seq, ff = 4 * width;
  std::printf("cpu: %s\n", bench::cpu_description().c_str());
  std::printf("shapes: %lld tokens, width %lld, %lld heads, vocab %lld, %s %s, %d threads\n",
              (long long)rows, (long long)width, (long long)heads, (long long)vocab,
              device_name.c_str(), dtype_name_arg.c_str(), num_threads());

  // The yardstick for the memory-bound ops.
  if (g_device.is_cpu()) {
    g_yardstick_bandwidth = cpu_triad_bandwidth();
    std::printf("%-44s %9s     %8.1f GB/s\n", "triad a = b * s + c (3 x 128 MiB)", "",
                g_yardstick_bandwidth / 1e9);
  } else {
    // A 1 GiB device-to-device copy (read + write).
    Tensor src = Tensor::zeros({1 << 28}, DType::F32, g_device), dst = empty({1 << 28}, DType::F32);
    const double seconds = best_seconds([&] { dst.copy_from(src); });
    g_yardstick_bandwidth = 2.0 * static_cast<double>(src.nbytes()) / seconds;
    g_yardstick_name = "copy";
    std::printf("%-44s %9.3f ms  %8.1f GB/s\n", "device copy (1 GiB, read + write)", seconds * 1e3,
                g_yardstick_bandwidth / 1e9);
  }

  Tensor x = random({rows, width}, 1), w_ff = random({ff, width}, 2), h = random({rows, ff}, 3);
  Tensor y_ff = empty({rows, ff}), dw_ff = zeros({ff, width});
  report_flops("matmul fc forward  x W^T",
               best_seconds([&] { matmul(y_ff, x, w_ff, false, true); }), 2.0 * rows * ff * width);
  report_flops("matmul fc dW += dy^T x",
               best_seconds([&] { matmul(dw_ff, h, x, true, false, 1, 1); }),
               2.0 * rows * ff * width);
  Tensor dx = empty({rows, width});
  report_flops("matmul fc dx = dy W", best_seconds([&] { matmul(dx, h, w_ff, false, false); }),
               2.0 * rows * ff * width);

  // The linear layers' GEMMs with their epilogues: linear_forward, linear_backward_through_gelu
  // (with cuBLASLt's GELU epilogues in bf16 where they agree with our GELU: logged on first use)
  // and linear_backward_weights, each beside the separate passes it replaces.
  Tensor b_ff = random({ff}, 14), pre_ff = empty({rows, ff}), w_proj = random({width, ff}, 15);
  Tensor db_ff = zeros({ff}), dpre = empty({rows, ff});
  report_flops("fc + bias + gelu: matmul, bias_add, gelu", best_seconds([&] {
                 matmul(pre_ff, x, w_ff, false, true);
                 bias_add_forward(pre_ff, b_ff);
                 gelu_forward(y_ff, pre_ff);
               }),
               2.0 * rows * ff * width);
  report_flops("fc + bias + gelu: linear_forward", best_seconds([&] {
                 linear_forward(y_ff, &pre_ff, x, w_ff, &b_ff, LinearActivation::gelu);
               }),
               2.0 * rows * ff * width);
  report_flops("proj dx through gelu: matmul, gelu bwd", best_seconds([&] {
                 matmul(dpre, x, w_proj, false, false);
                 gelu_backward(dpre, pre_ff, dpre);
               }),
               2.0 * rows * ff * width);
  report_flops("proj dx through gelu: one op", best_seconds([&] {
                 linear_backward_through_gelu(dpre, x, w_proj, pre_ff);
               }),
               2.0 * rows * ff * width);
  // The attention output projection joining the residual stream: the block's add after the
  // layer, or the GEMM's C matrix (CUDA).
  Tensor w_attn = random({width, width}, 16), b_attn = random({width}, 17);
  Tensor stream = random({rows, width}, 18), joined = empty({rows, width});
  Tensor branch = empty({rows, width});
  report_flops("proj + residual: linear_forward, add", best_seconds([&] {
                 linear_forward(branch, nullptr, x, w_attn, &b_attn, LinearActivation::none);
                 add(joined, stream, branch);
               }),
               2.0 * rows * width * width);
  report_flops("proj + residual: linear_forward(residual)", best_seconds([&] {
                 linear_forward(joined, nullptr, x, w_attn, &b_attn, LinearActivation::none,
                                &stream);
               }),
               2.0 * rows * width * width);
  // The bias gradient beside the weight gradient's GEMM, or on it (BGRADB on CUDA).
  report_flops("fc dW, db: matmul, bias_add backward", best_seconds([&] {
                 matmul(dw_ff, dpre, x, true, false, 1, 1);
                 bias_add_backward(db_ff, dpre);
               }),
               2.0 * rows * ff * width);
  report_flops("fc dW, db: linear_backward_weights", best_seconds([&] {
                 linear_backward_weights(dw_ff, &db_ff, dpre, x);
               }),
               2.0 * rows * ff * width);

  Tensor wte = random({vocab, width}, 4), logits = empty({rows, vocab});
  Tensor dwte = zeros({vocab, width});
  report_flops("matmul lm head forward",
               best_seconds([&] { matmul(logits, x, wte, false, true); }, 3),
               2.0 * rows * vocab * width);
  report_flops("matmul lm head dW += dy^T x",
               best_seconds([&] { matmul(dwte, logits, x, true, false, 1, 1); }, 3),
               2.0 * rows * vocab * width);
  report_flops("matmul lm head dx = dy W",
               best_seconds([&] { matmul(dx, logits, wte, false, false); }, 3),
               2.0 * rows * vocab * width);

  // GPT-2's 50257 tokens inside the padded 50304 columns; a smaller --vocab is all real.
  const std::int64_t real_vocab = std::min<std::int64_t>(vocab, 50257);
  std::vector<std::int32_t> target_values(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i)
    target_values[i] = static_cast<std::int32_t>(i * 7 % real_vocab);
  const Tensor targets = on_device_ints(target_values, {rows});
  Tensor losses = empty({rows}, DType::F32), lse = empty({rows}, DType::F32);
  Tensor logits_copy = logits.clone();
  report_bytes("cross_entropy forward", best_seconds([&] {
                 cross_entropy_forward(losses, lse, logits, targets, real_vocab);
               }),
               es * rows * vocab);
  report_bytes("cross_entropy backward (in place)", best_seconds([&] {
                 cross_entropy_backward(logits_copy, logits_copy, lse, targets, 1e-3f, real_vocab);
               }),
               2.0 * es * rows * vocab);
  // The pair the LM head runs in training: the two ops, or one whose second read of a row
  // follows the first at once (counted as one read and one write: what reaches memory if the
  // second read hits in L2).
  report_bytes("cross_entropy forward, then backward", best_seconds([&] {
                 cross_entropy_forward(losses, lse, logits_copy, targets, real_vocab);
                 cross_entropy_backward(logits_copy, logits_copy, lse, targets, 1e-3f, real_vocab);
               }),
               2.0 * es * rows * vocab);
  report_bytes("cross_entropy forward + backward (fused)", best_seconds([&] {
                 cross_entropy_forward_backward(losses, lse, logits_copy, logits_copy, targets,
                                                1e-3f, real_vocab);
               }),
               2.0 * es * rows * vocab);

  Tensor qkv = random({batch, seq, 3 * width}, 5), att = empty({batch, seq, width});
  Tensor att_lse = empty({batch, heads, seq}, DType::F32), dqkv = empty(qkv.shape());
  Tensor datt = random({batch, seq, width}, 6);
  const double att_flops = 4.0 * batch * heads * seq * seq * (width / heads) / 2.0;
  report_flops("attention forward",
               best_seconds([&] { attention_forward(att, att_lse, qkv, heads); }), att_flops);
  // Model FLOPs (twice the forward's), not executed ones: the backward also recomputes Q K^T.
  report_flops("attention backward",
               best_seconds([&] { attention_backward(dqkv, datt, qkv, att, att_lse, heads); }),
               2.0 * att_flops);
  set_attention_deterministic(false);  // training.deterministic: false (cuDNN's other algorithm)
  report_flops("attention backward, non-deterministic",
               best_seconds([&] { attention_backward(dqkv, datt, qkv, att, att_lse, heads); }),
               2.0 * att_flops);
  set_attention_deterministic(true);

  // Llama's rotary embedding into attention's layout: multi-head (r 1) and grouped-query (r 4,
  // heads / 4 key/value groups), head size width / heads; reads grouped, writes packed.
  for (const std::int64_t r : {std::int64_t{1}, std::int64_t{4}}) {
    if (heads % r != 0) continue;
    const std::int64_t kv_heads = heads / r, hs = width / heads;
    const std::int64_t in_width = kv_heads * (r + 2) * hs, out_width = heads * 3 * hs;
    Tensor grouped = random({batch, seq, in_width}, 19), packed = empty({batch, seq, out_width});
    Tensor dgrouped = empty(grouped.shape());
    const double bytes = es * rows * (in_width + out_width);
    const std::string r_label = " (r " + std::to_string(r) + ")";
    report_bytes(("rotary_qkv forward" + r_label).c_str(), best_seconds([&] {
                   rotary_qkv_forward(packed, grouped, kv_heads, r, 0, 10000.0);
                 }),
                 bytes);
    report_bytes(("rotary_qkv backward" + r_label).c_str(), best_seconds([&] {
                   rotary_qkv_backward(dgrouped, packed, kv_heads, r, 0, 10000.0);
                 }),
                 bytes);
  }

  Tensor ln_out = empty({rows, width}), mean = empty({rows}, DType::F32),
         rstd = empty({rows}, DType::F32);
  Tensor lnw = random({width}, 9), lnb = random({width}, 10);
  Tensor dlnw = zeros({width}), dlnb = zeros({width});
  Tensor residual = random({rows, width}, 11), sum = empty({rows, width});
  report_bytes("residual add", best_seconds([&] { add(sum, x, residual); }),
               3.0 * es * rows * width);
  report_bytes("layer_norm forward",
               best_seconds([&] { layer_norm_forward(ln_out, mean, rstd, x, lnw, lnb); }),
               2.0 * es * rows * width);
  report_bytes("layer_norm backward", best_seconds([&] {
                 layer_norm_backward(dx, dlnw, dlnb, ln_out, x, lnw, mean, rstd);
               }),
               3.0 * es * rows * width);
  report_bytes("layer_norm backward, then accumulate", best_seconds([&] {
                 layer_norm_backward(dx, dlnw, dlnb, ln_out, x, lnw, mean, rstd);
                 accumulate(dx, residual);
               }),
               4.0 * es * rows * width);
  report_bytes("layer_norm backward + residual (fused)", best_seconds([&] {
                 layer_norm_backward(dx, dlnw, dlnb, ln_out, x, lnw, mean, rstd, &residual);
               }),
               4.0 * es * rows * width);
  // Llama's norm: LayerNorm without the mean and the bias, on the same rows.
  Tensor dlnw_rms = zeros({width});
  report_bytes("rms_norm forward",
               best_seconds([&] { rms_norm_forward(ln_out, rstd, x, lnw, 1e-5f); }),
               2.0 * es * rows * width);
  report_bytes("rms_norm backward", best_seconds([&] {
                 rms_norm_backward(dx, dlnw_rms, ln_out, x, lnw, rstd);
               }),
               3.0 * es * rows * width);
  report_bytes("rms_norm backward + residual (fused)", best_seconds([&] {
                 rms_norm_backward(dx, dlnw_rms, ln_out, x, lnw, rstd, &residual);
               }),
               4.0 * es * rows * width);

  Tensor g = empty({rows, ff});
  Tensor bias = random({ff}, 8), dbias = zeros({ff});
  report_bytes("gelu forward", best_seconds([&] { gelu_forward(g, h); }), 2.0 * es * rows * ff);
  // The gradient from a tensor of its own: run in place, repeated backwards would shrink it
  // into subnormal floats, whose arithmetic is slow, and time that instead.
  Tensor gout = random({rows, ff}, 9);
  report_bytes("gelu backward", best_seconds([&] { gelu_backward(g, h, gout); }),
               3.0 * es * rows * ff);
  report_bytes("gelu backward, then bias_add backward", best_seconds([&] {
                 gelu_backward(g, h, gout);
                 bias_add_backward(dbias, g);
               }),
               3.0 * es * rows * ff);
  report_bytes("gelu backward + bias gradient (fused)",
               best_seconds([&] { gelu_backward(g, h, gout, &dbias); }), 3.0 * es * rows * ff);
  // Llama's MLP activation at the same hidden width: reads [rows, 2 ff] (gate, up pairs),
  // writes [rows, ff]; the backward also reads dout and writes [rows, 2 ff].
  Tensor gate_up = random({rows, 2 * ff}, 20), dgate_up = empty({rows, 2 * ff});
  report_bytes("swiglu forward", best_seconds([&] { swiglu_forward(g, gate_up); }),
               3.0 * es * rows * ff);
  report_bytes("swiglu backward", best_seconds([&] { swiglu_backward(dgate_up, h, gate_up); }),
               5.0 * es * rows * ff);
  Tensor bias_act = random({ff}, 12);
  report_bytes("bias_add forward", best_seconds([&] { bias_add_forward(y_ff, bias_act); }),
               2.0 * es * rows * ff);
  report_bytes("bias_add backward", best_seconds([&] { bias_add_backward(dbias, y_ff); }),
               es * rows * ff);
  Tensor x3 = x.view({batch, seq, width}), d3 = empty({batch, seq, width});
  report_bytes("dropout forward", best_seconds([&] {
                 dropout_forward(d3, x3, 0.1f, {1, 2}, {0, 0, seq});
               }),
               2.0 * es * rows * width);
  std::vector<std::int32_t> token_values(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i)
    token_values[i] = static_cast<std::int32_t>(i * 13 % real_vocab);
  Tensor tokens = on_device_ints(token_values, {batch, seq});
  Tensor emb = random({batch, seq, width}, 13);
  report_bytes("token_embedding backward",
               best_seconds([&] { token_embedding_backward(dwte, emb, tokens); }),
               (es + 8.0) * rows * width);
  // A byte-level corpus: one token (a space) in every sixth position, as in English text.
  for (std::int64_t i = 0; i < rows; i += 6) token_values[i] = 32;
  Tensor spaced_tokens = on_device_ints(token_values, {batch, seq});
  report_bytes("token_embedding backward, 1/6 one token",
               best_seconds([&] { token_embedding_backward(dwte, emb, spaced_tokens); }),
               (es + 8.0) * rows * width);

  // The optimizer, the gradient norm and the compute copies at GPT-2 124M's parameter count:
  // one flat tensor, then the 148 tensors of the model's layout (12 layers of 12, and 4).
  const std::int64_t n = 124'000'000;
  Tensor param = zeros({n}), grad = Tensor::full({n}, 1e-3f).to(g_device), m = zeros({n}),
         v = zeros({n});
  AdamWHyper hyper;
  hyper.lr = 1e-4f;
  report_bytes("adamw update (124M)",
               best_seconds([&] { adamw_update(param, grad, m, v, hyper); }, 3), 7.0 * 4 * n);
  report_bytes("sum_of_squares (124M)", best_seconds([&] { (void)sum_of_squares(grad); }, 3),
               4.0 * n);
  report_bytes("zero (124M)", best_seconds([&] { m.zero(); }, 3), 4.0 * n);
  if (g_dtype != DType::F32) {
    Tensor compute_copy = empty({n});
    report_bytes("convert f32 -> compute dtype (124M)",
                 best_seconds([&] { convert(compute_copy, param); }, 3), (4.0 + es) * n);
  }
  std::vector<std::int64_t> sizes;
  for (int layer = 0; layer < 12; ++layer)
    for (std::int64_t size : {width, width, 3 * width * width, 3 * width, width * width, width,
                              width, width, ff * width, ff, width * ff, width})
      sizes.push_back(size);
  for (std::int64_t size : {vocab * width, 1024 * width, width, width}) sizes.push_back(size);
  std::vector<Tensor> grads;
  std::vector<AdamWTensors> optimizer_tensors;
  std::int64_t total = 0;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    grads.push_back(grad.slice(0, 0, sizes[t]).contiguous());
    optimizer_tensors.push_back(
        {zeros({sizes[t]}), grads.back(), zeros({sizes[t]}), zeros({sizes[t]}), 0.1f});
    total += sizes[t];
  }
  char label[96];
  std::snprintf(label, sizeof label, "sums_of_squares (%zu tensors, %.0fM)", sizes.size(),
                total / 1e6);
  report_bytes(label, best_seconds([&] { (void)sums_of_squares(grads); }, 3), 4.0 * total);
  std::snprintf(label, sizeof label, "sum_of_squares each (%zu tensors)", sizes.size());
  report_bytes(label,
               best_seconds(
                   [&] {
                     for (const Tensor& t : grads) (void)sum_of_squares(t);
                   },
                   3),
               4.0 * total);
  // Zeroing the gradients at a step's start: one launch, or a memset each.
  std::vector<Tensor> zeroed;
  for (const AdamWTensors& t : optimizer_tensors) zeroed.push_back(t.m);
  std::snprintf(label, sizeof label, "zero_many (%zu tensors)", sizes.size());
  report_bytes(label, best_seconds([&] { zero_many(zeroed); }, 3), 4.0 * total);
  std::snprintf(label, sizeof label, "zero each (%zu tensors)", sizes.size());
  report_bytes(label,
               best_seconds(
                   [&] {
                     for (Tensor& t : zeroed) t.zero();
                   },
                   3),
               4.0 * total);
  if (g_dtype != DType::F32) {
    std::vector<Tensor> masters, copies;
    for (const AdamWTensors& t : optimizer_tensors) {
      masters.push_back(t.param);
      copies.push_back(empty(t.param.shape()));
    }
    std::snprintf(label, sizeof label, "convert_many to compute copies (%zu tensors)",
                  sizes.size());
    report_bytes(label, best_seconds([&] { convert_many(copies, masters); }, 3),
                 (4.0 + es) * total);
    std::snprintf(label, sizeof label, "convert each to compute copies (%zu tensors)",
                  sizes.size());
    report_bytes(label,
                 best_seconds(
                     [&] {
                       for (std::size_t t = 0; t < copies.size(); ++t)
                         convert(copies[t], masters[t]);
                     },
                     3),
                 (4.0 + es) * total);
  }
  std::snprintf(label, sizeof label, "adamw_update_many (%zu tensors)", sizes.size());
  report_bytes(label, best_seconds([&] { adamw_update_many(optimizer_tensors, hyper); }, 3),
               7.0 * 4 * total);
  return 0;
}
