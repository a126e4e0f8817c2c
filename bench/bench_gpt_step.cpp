// Training-step throughput of a GPT on this machine's CPU cores, against the sgemm rate
// OpenBLAS reaches on the same step's matrix shapes, measured in the same run.
//
//   bench_gpt_step [--family gpt2|llama --layers 12 --heads 12 --kv-heads H --width 768 --ff F
//                   --vocab 50257 --batch 4 --seq 64 --steps 5 --threads N
//                   --recompute none|selective|full]
//
// Prints ms/step (median), tokens/s, achieved GFLOP/s (3 x forward FLOPs per token: forward,
// and backward at twice the forward), the time split into forward / backward / optimizer,
// and the sgemm GFLOP/s of (a) exactly the GEMMs a step performs and (b) a large square
// GEMM. The aim is a step at >= 70% of (a): everything that is not a GEMM must be cheap.
// Memory: what the forward keeps for the backward (activations), of which the LM head's
// logits, and the step's peak above the weights, gradients and optimizer state (the CPU
// allocator's counts), under the chosen activation recomputation.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/cpu_info.h"
#include "framework/allocator.h"
#include "framework/philox.h"
#include "kernels/blas_check.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "layers/gpt_model.h"
#include "layers/model_facts.h"
#include "optimizers/grad_clip.h"
#include "optimizers/optimizer.h"

using namespace ternion;
using Clock = std::chrono::steady_clock;

namespace {

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Gemm {
  std::int64_t m, n, k;
  bool ta, tb;
  float beta;
};

// The GEMMs of one training step, from the built model: every matrix the blocks and the head
// multiply by is a weight [out, in] of a linear layer, y = x W^T, dx = dy W, dW += dy^T x (the
// token embedding is a GEMM only where the head is tied to it; a lookup otherwise).
std::vector<Gemm> step_gemms(const GptModel& model, std::int64_t rows) {
  std::vector<Gemm> out;
  for (const Parameter* p : model.parameters()) {
    const bool lookup = p->name == "wpe" || (p->name == "wte" && model.tied_embedding() == nullptr);
    if (p->value.dim() != 2 || lookup) continue;
    const std::int64_t outf = p->value.size(0), in = p->value.size(1);
    out.push_back({rows, outf, in, false, true, 0.0f});
    out.push_back({rows, in, outf, false, false, 0.0f});
    out.push_back({outf, in, rows, true, false, 1.0f});
  }
  return out;
}

// sgemm GFLOP/s over a list of GEMMs, best of `repeats` passes.
double gemm_rate(const std::vector<Gemm>& gemms, int repeats) {
  double flops = 0.0;
  std::vector<std::array<Tensor, 3>> buffers;
  for (const Gemm& g : gemms) {
    flops += 2.0 * g.m * g.n * g.k;
    Tensor a = Tensor::full(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, 0.01f);
    Tensor b = Tensor::full(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, 0.01f);
    buffers.push_back({a, b, Tensor::zeros({g.m, g.n})});
  }
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double start = now_s();
    for (std::size_t i = 0; i < gemms.size(); ++i)
      matmul(buffers[i][2], buffers[i][0], buffers[i][1], gemms[i].ta, gemms[i].tb, 1.0f,
             gemms[i].beta);
    best = std::min(best, now_s() - start);
  }
  return flops / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  ModelConfig c;
  c.n_layer = 12;
  c.n_head = 12;
  c.d_model = 768;
  c.vocab_size = 50257;
  c.vocab_pad_multiple = 128;
  std::int64_t batch = 4, seq = 64, steps = 5, threads = 0;
  RecomputePolicy recompute;
  std::string recompute_name = "none";
  const char* usage =
      "usage: bench_gpt_step [--family gpt2|llama] [--recompute none|selective|full] "
      "[--layers N] [--heads N] [--kv-heads N] [--width N] [--ff N] [--vocab N] [--batch N] "
      "[--seq N] [--steps N] [--threads N]\n";
  if (argc == 2 && std::string(argv[1]) == "--help") {
    std::fputs(usage, stdout);
    return 0;
  }
  if (argc % 2 == 0) {  // a flag without its value
    std::fputs(usage, stderr);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--family") c.family = argv[i + 1];
    else if (flag == "--recompute") {
      recompute_name = argv[i + 1];
      if (!parse_recompute(recompute_name, recompute.mode)) {
        std::fprintf(stderr, "bench_gpt_step: --recompute takes none, selective or full\n");
        return 2;
      }
    }
    else if (flag == "--kv-heads") c.n_kv_head = value;
    else if (flag == "--ff") c.d_ff = value;
    else if (flag == "--layers") c.n_layer = value;
    else if (flag == "--heads") c.n_head = value;
    else if (flag == "--width") c.d_model = value;
    else if (flag == "--vocab") c.vocab_size = value;
    else if (flag == "--batch") batch = value;
    else if (flag == "--seq") seq = value;
    else if (flag == "--steps") steps = value;
    else if (flag == "--threads") threads = value;
    else {
      std::fprintf(stderr, "bench_gpt_step: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  c.seq_len = seq;

  GptModel model(c);
  model.initialize(1);
  model.set_recompute(recompute);
  OptimizerConfig oc;
  auto optimizer = make_optimizer(oc, whole_parameters(model.parameters()));
  const std::int64_t params = count_elements(model.parameters());

  Tensor tokens = Tensor::empty({batch, seq}, DType::I32),
         targets = Tensor::empty({batch, seq}, DType::I32);
  for (std::int64_t i = 0; i < batch * seq; ++i) {
    tokens.data<std::int32_t>()[i] =
        static_cast<std::int32_t>(philox_bits({1, 1}, i).v[0] % c.vocab_size);
    targets.data<std::int32_t>()[i] =
        static_cast<std::int32_t>(philox_bits({1, 2}, i).v[0] % c.vocab_size);
  }

  std::vector<double> total, fwd, bwd, opt;
  CachingAllocator& memory = cpu_caching_allocator();
  double kept_mb = 0.0, peak_mb = 0.0;
  for (std::int64_t s = 0; s <= steps; ++s) {  // step 0 is warm-up
    const double t0 = now_s();
    model.zero_grad();
    const double before = static_cast<double>(memory.bytes_in_use());
    memory.reset_peak();
    MicroBatchInfo info;
    info.step = s + 1;
    const float loss_weight = 1.0f / static_cast<float>(batch * seq);
    info.loss_weight = loss_weight;  // as the trainer does: the head's gradient in its forward
    ActivationContext ctx(info);
    model.forward(tokens, targets, ctx);
    const double t1 = now_s();
    kept_mb = (static_cast<double>(memory.bytes_in_use()) - before) / 1e6;
    model.backward(loss_weight, ctx);
    const double t2 = now_s();
    peak_mb = (static_cast<double>(memory.peak_bytes_in_use()) - before) / 1e6;
    const double norm = std::sqrt(grad_sum_of_squares(model.parameters()));
    optimizer->step(1e-4f, clip_factor(norm, 1.0), s + 1);
    const double t3 = now_s();
    if (s == 0) continue;
    total.push_back(t3 - t0);
    fwd.push_back(t1 - t0);
    bwd.push_back(t2 - t1);
    opt.push_back(t3 - t2);
  }

  const double step_s = median(total);
  const double tokens_per_step = static_cast<double>(batch * seq);
  const double step_flops = training_flops_per_token(c) * tokens_per_step;
  const double achieved = step_flops / step_s / 1e9;
  const double shapes_rate = gemm_rate(step_gemms(model, batch * seq), 3);
  const double square_rate = gemm_rate({{2048, 2048, 2048, false, false, 0.0f}}, 3);

  std::printf("cpu:   %s\n", bench::cpu_description().c_str());
  if (const std::string warning = blas_kernel_warning(); !warning.empty())
    std::printf("warning: %s\n", warning.c_str());
  std::printf(
      "model: %s, %lld layers, %lld heads (%lld key/value), d_model %lld, vocab %lld (padded "
      "%lld), %.1fM parameters\n",
      c.family.c_str(), (long long)c.n_layer, (long long)c.n_head, (long long)c.kv_heads(),
      (long long)c.d_model, (long long)c.vocab_size, (long long)c.padded_vocab_size(),
      params / 1e6);
  std::printf("batch: %lld x %lld tokens, fp32, %d threads, %lld timed steps after 1 warm-up, "
              "recompute %s\n",
              (long long)batch, (long long)seq, num_threads(), (long long)steps,
              recompute_name.c_str());
  std::printf("step:  %.1f ms (median; forward %.1f, backward %.1f, clip+AdamW %.1f)\n",
              step_s * 1e3, median(fwd) * 1e3, median(bwd) * 1e3, median(opt) * 1e3);
  std::printf("rate:  %.0f tokens/s, %.1f GFLOP/s achieved (%.1f GFLOP per step)\n",
              tokens_per_step / step_s, achieved, step_flops / 1e9);
  std::printf("sgemm: %.1f GFLOP/s on this step's GEMM shapes, %.1f GFLOP/s on 2048^3\n",
              shapes_rate, square_rate);
  const double logits_mb = 4.0 * static_cast<double>(batch * seq * c.padded_vocab_size()) / 1e6;
  std::printf("memory: forward keeps %.1f MB for the backward (%.1f MB of it the head's f32 "
              "logits), step peak %.1f MB above the weights and optimizer state\n",
              kept_mb, logits_mb, peak_mb);
  std::printf("ratio: step at %.0f%% of the sgemm rate on its own shapes (%.0f%% of 2048^3)\n",
              100.0 * achieved / shapes_rate, 100.0 * achieved / square_rate);
  return 0;
}
