// A naive Llama in double precision, written from Hugging Face LlamaForCausalLM's formulas and
// nothing of Ternion's: the oracle tests/training/llama_reference_test.cpp holds the trainer to.
//
//   x = wte[token]                                   (no position embedding)
//   per block:  h = rmsnorm(x) * attn_norm           rmsnorm(x) = x / sqrt(mean(x^2) + eps)
//               q, k, v = h Wqkv^T                   rows grouped by key/value head g: its
//                                                    r = H / G query heads, key g, value g
//               q, k rotated (rotate-half RoPE)      angle = t / theta^(2i / hs), i < hs / 2
//               query head h reads key/value group h / r, causal, scale 1 / sqrt(hs)
//               x += attention Wproj^T
//               a = (rmsnorm(x) * mlp_norm) Wgate_up^T    rows 2j gate_j, 2j + 1 up_j
//               x += (silu(a_2j) * a_2j+1) Wdown^T
//   logits = (rmsnorm(x) * norm) Wlm^T               Wlm = wte when tied; the softmax covers
//                                                    the first vocab_size rows only
//
// The backward is written out by hand (the test checks it against central differences of this
// forward). Matrices are row-major [out, in]; every parameter is a flat vector keyed by its
// Ternion name.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ternion::llama_reference {

struct Config {
  std::int64_t vocab = 0, padded_vocab = 0, n_layer = 0, d_model = 0, n_head = 0, n_kv_head = 0,
               d_ff = 0;
  double rope_theta = 10000.0, norm_eps = 1e-5;
  // Llama 3.1's frequency scaling (transformers' rope_type "llama3") where factor > 0.
  double rope_factor = 0.0, rope_low = 1.0, rope_high = 4.0, rope_original_context = 8192.0;
  bool tied = false;

  std::int64_t head_size() const { return d_model / n_head; }
  std::int64_t queries_per_kv() const { return n_head / n_kv_head; }
};

using Tensors = std::map<std::string, std::vector<double>>;

inline std::string block_name(std::int64_t layer, const char* part) {
  return "h." + std::to_string(layer) + "." + part;
}

// Every parameter's name and whole shape.
inline std::vector<std::pair<std::string, std::vector<std::int64_t>>> parameter_shapes(
    const Config& c) {
  const std::int64_t C = c.d_model, hs = c.head_size();
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes = {
      {"wte", {c.padded_vocab, C}}};
  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    shapes.push_back({block_name(l, "attn_norm.weight"), {C}});
    shapes.push_back({block_name(l, "attn.qkv.weight"), {(c.n_head + 2 * c.n_kv_head) * hs, C}});
    shapes.push_back({block_name(l, "attn.proj.weight"), {C, C}});
    shapes.push_back({block_name(l, "mlp_norm.weight"), {C}});
    shapes.push_back({block_name(l, "mlp.gate_up.weight"), {2 * c.d_ff, C}});
    shapes.push_back({block_name(l, "mlp.down.weight"), {C, c.d_ff}});
  }
  shapes.push_back({"norm.weight", {C}});
  if (!c.tied) shapes.push_back({"lm_head.weight", {c.padded_vocab, C}});
  return shapes;
}

// AdamW's decoupled weight decay: on matrices and embeddings, not on the norms' weights.
inline bool decays(const std::string& name) {
  const std::string suffix = "norm.weight";
  return !(name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
}

class Model {
 public:
  Model(Config config, const Tensors& params) : c_(config), p_(params) {}

  // The sum of the sequence's token losses (targets < 0 are skipped); with `grads`, adds
  // `weight` times its gradient to them (keys as the parameters').
  double sequence_loss(const std::vector<int>& tokens, const std::vector<int>& targets,
                       double weight, Tensors* grads) const {
    Activations a = forward(tokens);
    const std::int64_t T = static_cast<std::int64_t>(tokens.size()), C = c_.d_model;
    const std::vector<double>& head = p_.at(head_name());
    double loss = 0.0;
    std::vector<std::vector<double>> d_x(T, std::vector<double>(C, 0.0));
    std::vector<double> d_final_norm(C, 0.0);
    std::vector<double> d_head(grads ? head.size() : 0, 0.0);
    for (std::int64_t t = 0; t < T; ++t) {
      if (targets[t] < 0) continue;
      const std::vector<double> logits = matvec(head, c_.vocab, C, a.final_normed[t]);
      double peak = logits[0];
      for (double z : logits) peak = std::max(peak, z);
      double total = 0.0;
      for (double z : logits) total += std::exp(z - peak);
      loss += std::log(total) + peak - logits[targets[t]];
      if (!grads) continue;
      std::vector<double> d_logits(c_.vocab);
      for (std::int64_t v = 0; v < c_.vocab; ++v)
        d_logits[v] = weight * (std::exp(logits[v] - peak) / total - (v == targets[t] ? 1 : 0));
      std::vector<double> d_normed(C, 0.0);
      add_matvec_t(head, c_.vocab, C, d_logits, d_normed);
      add_outer(d_head, c_.vocab, C, d_logits, a.final_normed[t]);
      rmsnorm_backward(a.final_in[t], p_.at("norm.weight"), a.final_rstd[t], d_normed, d_x[t],
                       d_final_norm);
    }
    if (!grads) return loss;
    add_to(*grads, head_name(), d_head);
    add_to(*grads, "norm.weight", d_final_norm);
    for (std::int64_t l = c_.n_layer - 1; l >= 0; --l) block_backward(l, a.blocks[l], d_x, *grads);
    std::vector<double> d_wte(p_.at("wte").size(), 0.0);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < C; ++i) d_wte[tokens[t] * C + i] += d_x[t][i];
    add_to(*grads, "wte", d_wte);
    return loss;
  }

  // Logits [T, vocab] (the real tokens' columns).
  std::vector<std::vector<double>> logits(const std::vector<int>& tokens) const {
    Activations a = forward(tokens);
    std::vector<std::vector<double>> out;
    for (const std::vector<double>& h : a.final_normed)
      out.push_back(matvec(p_.at(head_name()), c_.vocab, c_.d_model, h));
    return out;
  }

 private:
  using Rows = std::vector<std::vector<double>>;  // [T][features]

  struct BlockActivations {
    Rows in, attn_normed, q, k, v;  // q [T][H hs], k and v [T][G hs], q and k rotated
    std::vector<double> attn_rstd, mlp_rstd;
    std::vector<Rows> probs;        // [H][t][u], u <= t
    Rows attended, mid, mlp_normed, gate_up, swiglu;
  };
  struct Activations {
    std::vector<BlockActivations> blocks;
    Rows final_in, final_normed;
    std::vector<double> final_rstd;
  };

  std::string head_name() const { return c_.tied ? "wte" : "lm_head.weight"; }
  const std::vector<double>& param(std::int64_t layer, const char* part) const {
    return p_.at(block_name(layer, part));
  }

  static std::vector<double> matvec(const std::vector<double>& w, std::int64_t out,
                                    std::int64_t in, const std::vector<double>& x) {
    std::vector<double> y(out, 0.0);
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) y[o] += w[o * in + i] * x[i];
    return y;
  }
  // dx += W^T dy
  static void add_matvec_t(const std::vector<double>& w, std::int64_t out, std::int64_t in,
                           const std::vector<double>& dy, std::vector<double>& dx) {
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) dx[i] += w[o * in + i] * dy[o];
  }
  // dW += dy x^T
  static void add_outer(std::vector<double>& dw, std::int64_t out, std::int64_t in,
                        const std::vector<double>& dy, const std::vector<double>& x) {
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) dw[o * in + i] += dy[o] * x[i];
  }
  static void add_to(Tensors& grads, const std::string& name, const std::vector<double>& g) {
    std::vector<double>& dst = grads[name];
    if (dst.empty()) dst.assign(g.size(), 0.0);
    for (std::size_t i = 0; i < g.size(); ++i) dst[i] += g[i];
  }

  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w,
                              double& rstd) const {
    double squares = 0.0;
    for (double xi : x) squares += xi * xi;
    rstd = 1.0 / std::sqrt(squares / static_cast<double>(x.size()) + c_.norm_eps);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * rstd * w[i];
    return y;
  }
  // y = x r w with r = (mean(x^2) + eps)^-1/2, so dr/dx_j = -r^3 x_j / C.
  static void rmsnorm_backward(const std::vector<double>& x, const std::vector<double>& w,
                               double rstd, const std::vector<double>& dy, std::vector<double>& dx,
                               std::vector<double>& dw) {
    const double n = static_cast<double>(x.size());
    double dot = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      dw[i] += dy[i] * x[i] * rstd;
      dot += dy[i] * w[i] * x[i];
    }
    for (std::size_t i = 0; i < x.size(); ++i)
      dx[i] += rstd * dy[i] * w[i] - x[i] * rstd * rstd * rstd * dot / n;
  }

  // theta^(-2i / hs), scaled as transformers' _compute_llama3_parameters does: wavelengths
  // below original / high kept, above original / low divided by the factor, blended between.
  double inverse_frequency(std::int64_t i) const {
    const double f = 1.0 / std::pow(c_.rope_theta, 2.0 * static_cast<double>(i) /
                                                       static_cast<double>(c_.head_size()));
    if (c_.rope_factor <= 0) return f;
    const double wavelength = 2.0 * M_PI / f;
    if (wavelength < c_.rope_original_context / c_.rope_high) return f;
    if (wavelength > c_.rope_original_context / c_.rope_low) return f / c_.rope_factor;
    const double smooth =
        (c_.rope_original_context / wavelength - c_.rope_low) / (c_.rope_high - c_.rope_low);
    return (1.0 - smooth) * f / c_.rope_factor + smooth * f;
  }

  // Rotates one head's features at position t in place: (x_i, x_{i+hs/2}) by angle t * f_i;
  // sign -1 applies the inverse (transposed) rotation, which is the backward.
  void rotate(double* x, std::int64_t t, double sign) const {
    const std::int64_t half = c_.head_size() / 2;
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inverse_frequency(i);
      const double cs = std::cos(angle), sn = sign * std::sin(angle);
      const double a = x[i], b = x[i + half];
      x[i] = a * cs - b * sn;
      x[i + half] = b * cs + a * sn;
    }
  }

  Activations forward(const std::vector<int>& tokens) const {
    const std::int64_t T = static_cast<std::int64_t>(tokens.size()), C = c_.d_model;
    const std::int64_t H = c_.n_head, G = c_.n_kv_head, r = c_.queries_per_kv(),
                       hs = c_.head_size(), F = c_.d_ff;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    Activations a;
    Rows x(T);
    for (std::int64_t t = 0; t < T; ++t)
      x[t].assign(p_.at("wte").begin() + tokens[t] * C, p_.at("wte").begin() + (tokens[t] + 1) * C);
    for (std::int64_t l = 0; l < c_.n_layer; ++l) {
      BlockActivations b;
      b.in = x;
      b.attn_rstd.resize(T);
      b.mlp_rstd.resize(T);
      for (std::int64_t t = 0; t < T; ++t) {
        b.attn_normed.push_back(rmsnorm(x[t], param(l, "attn_norm.weight"), b.attn_rstd[t]));
        const std::vector<double> qkv =
            matvec(param(l, "attn.qkv.weight"), (H + 2 * G) * hs, C, b.attn_normed[t]);
        std::vector<double> q(H * hs), k(G * hs), v(G * hs);
        for (std::int64_t g = 0; g < G; ++g) {
          const double* group = qkv.data() + g * (r + 2) * hs;
          for (std::int64_t j = 0; j < r * hs; ++j) q[g * r * hs + j] = group[j];
          for (std::int64_t j = 0; j < hs; ++j) {
            k[g * hs + j] = group[r * hs + j];
            v[g * hs + j] = group[(r + 1) * hs + j];
          }
        }
        for (std::int64_t h = 0; h < H; ++h) rotate(q.data() + h * hs, t, 1.0);
        for (std::int64_t g = 0; g < G; ++g) rotate(k.data() + g * hs, t, 1.0);
        b.q.push_back(q);
        b.k.push_back(k);
        b.v.push_back(v);
      }
      b.probs.assign(H, Rows(T));
      b.attended.assign(T, std::vector<double>(C, 0.0));
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t g = h / r;
        for (std::int64_t t = 0; t < T; ++t) {
          std::vector<double>& p = b.probs[h][t];
          p.resize(t + 1);
          double peak = -INFINITY, total = 0.0;
          for (std::int64_t u = 0; u <= t; ++u) {
            double s = 0.0;
            for (std::int64_t j = 0; j < hs; ++j) s += b.q[t][h * hs + j] * b.k[u][g * hs + j];
            p[u] = s * scale;
            peak = std::max(peak, p[u]);
          }
          for (double& pu : p) total += (pu = std::exp(pu - peak));
          for (std::int64_t u = 0; u <= t; ++u) {
            p[u] /= total;
            for (std::int64_t j = 0; j < hs; ++j)
              b.attended[t][h * hs + j] += p[u] * b.v[u][g * hs + j];
          }
        }
      }
      for (std::int64_t t = 0; t < T; ++t) {
        const std::vector<double> out = matvec(param(l, "attn.proj.weight"), C, C, b.attended[t]);
        for (std::int64_t i = 0; i < C; ++i) x[t][i] += out[i];
      }
      b.mid = x;
      for (std::int64_t t = 0; t < T; ++t) {
        b.mlp_normed.push_back(rmsnorm(x[t], param(l, "mlp_norm.weight"), b.mlp_rstd[t]));
        b.gate_up.push_back(matvec(param(l, "mlp.gate_up.weight"), 2 * F, C, b.mlp_normed[t]));
        std::vector<double> m(F);
        for (std::int64_t j = 0; j < F; ++j) {
          const double gate = b.gate_up[t][2 * j];
          m[j] = gate / (1.0 + std::exp(-gate)) * b.gate_up[t][2 * j + 1];
        }
        const std::vector<double> out = matvec(param(l, "mlp.down.weight"), C, F, m);
        for (std::int64_t i = 0; i < C; ++i) x[t][i] += out[i];
        b.swiglu.push_back(std::move(m));
      }
      a.blocks.push_back(std::move(b));
    }
    a.final_in = x;
    a.final_rstd.resize(T);
    for (std::int64_t t = 0; t < T; ++t)
      a.final_normed.push_back(rmsnorm(x[t], p_.at("norm.weight"), a.final_rstd[t]));
    return a;
  }

  // d_x holds the gradient of the block's output on entry and of its input on return.
  void block_backward(std::int64_t l, const BlockActivations& b, Rows& d_x, Tensors& grads) const {
    const std::int64_t T = static_cast<std::int64_t>(d_x.size()), C = c_.d_model;
    const std::int64_t H = c_.n_head, G = c_.n_kv_head, r = c_.queries_per_kv(),
                       hs = c_.head_size(), F = c_.d_ff;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    const std::vector<double>&w_qkv = param(l, "attn.qkv.weight"),
                           &w_proj = param(l, "attn.proj.weight"),
                           &w_gate_up = param(l, "mlp.gate_up.weight"),
                           &w_down = param(l, "mlp.down.weight");
    std::vector<double> d_qkv_w(w_qkv.size(), 0.0), d_proj_w(w_proj.size(), 0.0),
        d_gate_up_w(w_gate_up.size(), 0.0), d_down_w(w_down.size(), 0.0), d_attn_norm(C, 0.0),
        d_mlp_norm(C, 0.0);
    // MLP branch; the residual passes d_x through unchanged.
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<double> d_m(F, 0.0), d_a(2 * F), d_normed(C, 0.0);
      add_matvec_t(w_down, C, F, d_x[t], d_m);
      add_outer(d_down_w, C, F, d_x[t], b.swiglu[t]);
      for (std::int64_t j = 0; j < F; ++j) {
        const double gate = b.gate_up[t][2 * j], up = b.gate_up[t][2 * j + 1];
        const double sig = 1.0 / (1.0 + std::exp(-gate));
        d_a[2 * j] = d_m[j] * up * sig * (1.0 + gate * (1.0 - sig));
        d_a[2 * j + 1] = d_m[j] * gate * sig;
      }
      add_matvec_t(w_gate_up, 2 * F, C, d_a, d_normed);
      add_outer(d_gate_up_w, 2 * F, C, d_a, b.mlp_normed[t]);
      rmsnorm_backward(b.mid[t], param(l, "mlp_norm.weight"), b.mlp_rstd[t], d_normed, d_x[t],
                       d_mlp_norm);
    }
    // Attention branch.
    Rows d_attended(T, std::vector<double>(C, 0.0)), d_q(T, std::vector<double>(H * hs, 0.0)),
        d_k(T, std::vector<double>(G * hs, 0.0)), d_v(T, std::vector<double>(G * hs, 0.0));
    for (std::int64_t t = 0; t < T; ++t) {
      add_matvec_t(w_proj, C, C, d_x[t], d_attended[t]);
      add_outer(d_proj_w, C, C, d_x[t], b.attended[t]);
    }
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t g = h / r;
      for (std::int64_t t = 0; t < T; ++t) {
        const std::vector<double>& p = b.probs[h][t];
        std::vector<double> d_p(t + 1, 0.0);
        double weighted = 0.0;
        for (std::int64_t u = 0; u <= t; ++u) {
          for (std::int64_t j = 0; j < hs; ++j) {
            d_p[u] += d_attended[t][h * hs + j] * b.v[u][g * hs + j];
            d_v[u][g * hs + j] += p[u] * d_attended[t][h * hs + j];
          }
          weighted += p[u] * d_p[u];
        }
        for (std::int64_t u = 0; u <= t; ++u) {
          const double d_score = p[u] * (d_p[u] - weighted) * scale;
          for (std::int64_t j = 0; j < hs; ++j) {
            d_q[t][h * hs + j] += d_score * b.k[u][g * hs + j];
            d_k[u][g * hs + j] += d_score * b.q[t][h * hs + j];
          }
        }
      }
    }
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t h = 0; h < H; ++h) rotate(d_q[t].data() + h * hs, t, -1.0);
      for (std::int64_t g = 0; g < G; ++g) rotate(d_k[t].data() + g * hs, t, -1.0);
      std::vector<double> d_qkv((H + 2 * G) * hs), d_normed(C, 0.0);
      for (std::int64_t g = 0; g < G; ++g) {
        double* group = d_qkv.data() + g * (r + 2) * hs;
        for (std::int64_t j = 0; j < r * hs; ++j) group[j] = d_q[t][g * r * hs + j];
        for (std::int64_t j = 0; j < hs; ++j) {
          group[r * hs + j] = d_k[t][g * hs + j];
          group[(r + 1) * hs + j] = d_v[t][g * hs + j];
        }
      }
      add_matvec_t(w_qkv, (H + 2 * G) * hs, C, d_qkv, d_normed);
      add_outer(d_qkv_w, (H + 2 * G) * hs, C, d_qkv, b.attn_normed[t]);
      rmsnorm_backward(b.in[t], param(l, "attn_norm.weight"), b.attn_rstd[t], d_normed, d_x[t],
                       d_attn_norm);
    }
    add_to(grads, block_name(l, "attn_norm.weight"), d_attn_norm);
    add_to(grads, block_name(l, "attn.qkv.weight"), d_qkv_w);
    add_to(grads, block_name(l, "attn.proj.weight"), d_proj_w);
    add_to(grads, block_name(l, "mlp_norm.weight"), d_mlp_norm);
    add_to(grads, block_name(l, "mlp.gate_up.weight"), d_gate_up_w);
    add_to(grads, block_name(l, "mlp.down.weight"), d_down_w);
  }

  Config c_;
  const Tensors& p_;
};

}  // namespace ternion::llama_reference
