// Per-op timings at GPT-2 124M shapes (batch 4 x 64 tokens by default), to see where a
// training step's time goes beside the GEMMs.
//   bench_kernels [--batch 4 --seq 64 --width 768 --heads 12 --vocab 50304 --threads N]
// Each op runs a few times; the best time is printed with its GFLOP/s (GEMMs) or its
// effective memory bandwidth (everything else: bytes read + written / time).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "framework/philox.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/bias_add.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layer_norm.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"

using namespace ternion;

namespace {

double best_seconds(const std::function<void()>& op, int repeats = 5) {
  op();  // warm-up
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    op();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

Tensor random(const Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = philox_normal({seed, 7}, i) * 0.1f;
  return t;
}

void report_flops(const char* name, double seconds, double flops) {
  std::printf("%-34s %9.3f ms  %8.1f GFLOP/s\n", name, seconds * 1e3, flops / seconds / 1e9);
}
void report_bytes(const char* name, double seconds, double bytes) {
  std::printf("%-34s %9.3f ms  %8.1f GB/s\n", name, seconds * 1e3, bytes / seconds / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t batch = 4, seq = 64, width = 768, heads = 12, vocab = 50304, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::int64_t v = std::atoll(argv[i + 1]);
    if (flag == "--batch") batch = v;
    else if (flag == "--seq") seq = v;
    else if (flag == "--width") width = v;
    else if (flag == "--heads") heads = v;
    else if (flag == "--vocab") vocab = v;
    else if (flag == "--threads") threads = v;
    else {
      std::fprintf(stderr, "bench_kernels: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const std::int64_t rows = batch * seq, ff = 4 * width;
  std::printf("shapes: %lld tokens, width %lld, %lld heads, vocab %lld, %d threads\n",
              (long long)rows, (long long)width, (long long)heads, (long long)vocab, num_threads());

  Tensor x = random({rows, width}, 1), w_ff = random({ff, width}, 2), h = random({rows, ff}, 3);
  Tensor y_ff = Tensor::empty({rows, ff}), dw_ff = Tensor::zeros({ff, width});
  report_flops("matmul fc forward  x W^T", best_seconds([&] { matmul(y_ff, x, w_ff, false, true); }),
               2.0 * rows * ff * width);
  report_flops("matmul fc dW += dy^T x", best_seconds([&] { matmul(dw_ff, h, x, true, false, 1, 1); }),
               2.0 * rows * ff * width);
  Tensor dx = Tensor::empty({rows, width});
  report_flops("matmul fc dx = dy W", best_seconds([&] { matmul(dx, h, w_ff, false, false); }),
               2.0 * rows * ff * width);

  Tensor wte = random({vocab, width}, 4), logits = Tensor::empty({rows, vocab});
  Tensor dwte = Tensor::zeros({vocab, width});
  report_flops("matmul lm head forward", best_seconds([&] { matmul(logits, x, wte, false, true); }, 3),
               2.0 * rows * vocab * width);
  report_flops("matmul lm head dW += dy^T x", best_seconds([&] { matmul(dwte, logits, x, true, false, 1, 1); }, 3),
               2.0 * rows * vocab * width);
  report_flops("matmul lm head dx = dy W", best_seconds([&] { matmul(dx, logits, wte, false, false); }, 3),
               2.0 * rows * vocab * width);

  // GPT-2's 50257 tokens inside the padded 50304 columns; a smaller --vocab is all real.
  const std::int64_t real_vocab = std::min<std::int64_t>(vocab, 50257);
  Tensor targets = Tensor::empty({rows}, DType::I32);
  for (std::int64_t i = 0; i < rows; ++i) targets.data<std::int32_t>()[i] = static_cast<std::int32_t>(i * 7 % real_vocab);
  Tensor losses = Tensor::empty({rows}), lse = Tensor::empty({rows});
  Tensor logits_copy = logits.clone();
  report_bytes("cross_entropy forward", best_seconds([&] { cross_entropy_forward(losses, lse, logits, targets, real_vocab); }),
               4.0 * rows * vocab);
  report_bytes("cross_entropy backward (in place)",
               best_seconds([&] { cross_entropy_backward(logits_copy, logits_copy, lse, targets, 1e-3f, real_vocab); }),
               8.0 * rows * vocab);

  Tensor qkv = random({batch, seq, 3 * width}, 5), att = Tensor::empty({batch, seq, width});
  Tensor att_lse = Tensor::empty({batch, heads, seq}), dqkv = Tensor::empty(qkv.shape());
  Tensor datt = random({batch, seq, width}, 6);
  const double att_flops = 4.0 * batch * heads * seq * seq * (width / heads) / 2.0;
  report_flops("attention forward", best_seconds([&] { attention_forward(att, att_lse, qkv, heads); }), att_flops);
  // Model FLOPs (twice the forward's), not executed ones: the backward also recomputes Q K^T.
  report_flops("attention backward", best_seconds([&] { attention_backward(dqkv, datt, qkv, att, att_lse, heads); }),
               2.0 * att_flops);

  Tensor ln_out = Tensor::empty({rows, width}), mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  Tensor lnw = Tensor::full({width}, 1.0f), lnb = Tensor::zeros({width});
  Tensor dlnw = Tensor::zeros({width}), dlnb = Tensor::zeros({width});
  report_bytes("layer_norm forward", best_seconds([&] { layer_norm_forward(ln_out, mean, rstd, x, lnw, lnb); }),
               8.0 * rows * width);
  report_bytes("layer_norm backward",
               best_seconds([&] { layer_norm_backward(dx, dlnw, dlnb, ln_out, x, lnw, mean, rstd); }),
               12.0 * rows * width);
  Tensor g = Tensor::empty({rows, ff});
  report_bytes("gelu forward", best_seconds([&] { gelu_forward(g, h); }), 8.0 * rows * ff);
  report_bytes("gelu backward", best_seconds([&] { gelu_backward(g, h, g); }), 12.0 * rows * ff);
  Tensor bias = random({ff}, 8), dbias = Tensor::zeros({ff});
  report_bytes("bias_add forward", best_seconds([&] { bias_add_forward(y_ff, bias); }), 8.0 * rows * ff);
  report_bytes("bias_add backward", best_seconds([&] { bias_add_backward(dbias, y_ff); }), 4.0 * rows * ff);
  Tensor x3 = x.view({batch, seq, width}), d3 = Tensor::empty({batch, seq, width});
  report_bytes("dropout forward", best_seconds([&] { dropout_forward(d3, x3, 0.1f, {1, 2}, {0, 0, seq}); }),
               8.0 * rows * width);
  Tensor tokens = Tensor::empty({batch, seq}, DType::I32);
  for (std::int64_t i = 0; i < rows; ++i) tokens.data<std::int32_t>()[i] = static_cast<std::int32_t>(i * 13 % real_vocab);
  Tensor emb = Tensor::empty({batch, seq, width});
  report_bytes("token_embedding backward", best_seconds([&] { token_embedding_backward(dwte, emb, tokens); }),
               8.0 * rows * width);

  // The optimizer and the gradient norm at GPT-2 124M's parameter count, as one flat tensor.
  const std::int64_t n = 124'000'000;
  Tensor param = Tensor::zeros({n}), grad = Tensor::full({n}, 1e-3f), m = Tensor::zeros({n}), v = Tensor::zeros({n});
  AdamWHyper hyper;
  hyper.lr = 1e-4f;
  report_bytes("adamw update (124M)", best_seconds([&] { adamw_update(param, grad, m, v, hyper); }, 3),
               7.0 * 4 * n);
  report_bytes("sum_of_squares (124M)", best_seconds([&] { (void)sum_of_squares(grad); }, 3), 4.0 * n);
  report_bytes("zero (124M)", best_seconds([&] { m.zero(); }, 3), 4.0 * n);
  return 0;
}
