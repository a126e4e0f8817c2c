#include "training/hf_export.h"

#include <cmath>
#include <cstring>
#include <set>

#include "kernels/layer_norm.h"
#include "training/hf_interop.h"
#include "training/hf_parameter_source.h"

namespace ternion {

namespace {

// [rows, cols] -> [cols, rows], for any dtype (the element bytes are moved, never converted).
Tensor transpose(const Tensor& t) {
  const std::int64_t rows = t.size(0), cols = t.size(1);
  Tensor out = Tensor::empty({cols, rows}, t.dtype());
  const std::size_t elem = dtype_size(t.dtype());
  const auto* src = static_cast<const char*>(t.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      std::memcpy(dst + (c * rows + r) * elem, src + (r * cols + c) * elem, elem);
  return out;
}

// Our QKV rows (or bias elements), grouped per head as [q_h | k_h | v_h], regrouped as
// [all q | all k | all v] with head h at h*hs within each: row (h*3 + part)*hs + i moves to
// part*C + h*hs + i. Dimension 0 is the one regrouped; `t` is contiguous.
// Rows [q_0 k_0 v_0 | q_1 k_1 v_1 | ...] (ours) -> [q_0 q_1 .. | k_0 k_1 .. | v_0 ..] (GPT-2's);
// `inverse` goes back.
Tensor regroup_qkv(const Tensor& t, std::int64_t n_head, std::int64_t head_size, bool inverse) {
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  const std::size_t row_bytes = t.nbytes() / static_cast<std::size_t>(t.size(0));
  const std::int64_t c = n_head * head_size;
  const auto* src = static_cast<const char*>(t.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (std::int64_t h = 0; h < n_head; ++h)
    for (std::int64_t part = 0; part < 3; ++part) {
      auto ours = static_cast<std::size_t>((h * 3 + part) * head_size) * row_bytes;
      auto theirs = static_cast<std::size_t>(part * c + h * head_size) * row_bytes;
      if (inverse) std::swap(ours, theirs);
      std::memcpy(dst + theirs, src + ours, static_cast<std::size_t>(head_size) * row_bytes);
    }
  return out;
}

Tensor qkv_heads_to_parts(const Tensor& t, std::int64_t n_head, std::int64_t head_size) {
  return regroup_qkv(t, n_head, head_size, false);
}


}  // namespace

std::vector<std::pair<std::string, Tensor>> to_hf_gpt2(
    const ModelConfig& config, const std::map<std::string, Tensor>& params) {
  if (config.block != "transformer")
    TN_THROW(CheckpointError, "cannot export block type '", config.block,
             "' to GPT-2 (only \"transformer\" has a GPT-2 counterpart)");
  const std::int64_t c = config.d_model, f = config.ff_width(), hs = config.head_size();
  TN_CHECK(config.n_head > 0 && hs * config.n_head == c, "n_head ", config.n_head,
           " does not divide d_model ", c);
  ParameterSource source(params, "GPT-2");
  std::vector<std::pair<std::string, Tensor>> out;
  auto as_is = [&](const std::string& ours, const std::string& theirs, const Shape& shape) {
    out.emplace_back(theirs, source.take(ours, shape).clone());
  };
  auto conv1d = [&](const std::string& ours, const std::string& theirs, std::int64_t out_features,
                    std::int64_t in_features) {
    out.emplace_back(theirs, transpose(source.take(ours, {out_features, in_features})));
  };

  const Tensor wte = source.take("wte", {config.padded_vocab_size(), c});
  out.emplace_back("transformer.wte.weight", wte.slice(0, 0, config.vocab_size).clone());
  as_is("wpe", "transformer.wpe.weight", {config.seq_len, c});
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    const std::string ours = "h." + std::to_string(i) + ".";
    const std::string theirs = "transformer.h." + std::to_string(i) + ".";
    as_is(ours + "ln_1.weight", theirs + "ln_1.weight", {c});
    as_is(ours + "ln_1.bias", theirs + "ln_1.bias", {c});
    out.emplace_back(theirs + "attn.c_attn.weight",
                     transpose(qkv_heads_to_parts(source.take(ours + "attn.qkv.weight", {3 * c, c}),
                                                  config.n_head, hs)));
    out.emplace_back(theirs + "attn.c_attn.bias",
                     qkv_heads_to_parts(source.take(ours + "attn.qkv.bias", {3 * c}),
                                        config.n_head, hs));
    conv1d(ours + "attn.proj.weight", theirs + "attn.c_proj.weight", c, c);
    as_is(ours + "attn.proj.bias", theirs + "attn.c_proj.bias", {c});
    as_is(ours + "ln_2.weight", theirs + "ln_2.weight", {c});
    as_is(ours + "ln_2.bias", theirs + "ln_2.bias", {c});
    conv1d(ours + "mlp.fc.weight", theirs + "mlp.c_fc.weight", f, c);
    as_is(ours + "mlp.fc.bias", theirs + "mlp.c_fc.bias", {f});
    conv1d(ours + "mlp.proj.weight", theirs + "mlp.c_proj.weight", c, f);
    as_is(ours + "mlp.proj.bias", theirs + "mlp.c_proj.bias", {c});
  }
  as_is("ln_f.weight", "transformer.ln_f.weight", {c});
  as_is("ln_f.bias", "transformer.ln_f.bias", {c});
  source.check_all_taken();
  return out;
}

std::string hf_gpt2_config_json(const ModelConfig& config) {
  // HF's GPT-2 LayerNorm epsilon is a config field; ours is a kernel constant, written as the
  // double HF has (1e-05), not kLayerNormEps's float expansion.
  static_assert(kLayerNormEps == 1e-5f, "layer_norm_epsilon below must match kLayerNormEps");
  // Our dropout acts on the embeddings and the residual branches; attention probabilities
  // are never dropped. n_inner null is HF's default, 4 * n_embd, which is ours too.
  const OrderedJson root = {{"architectures", {"GPT2LMHeadModel"}},
                     {"model_type", "gpt2"},
                     {"vocab_size", config.vocab_size},
                     {"n_positions", config.seq_len},
                     {"n_ctx", config.seq_len},
                     {"n_embd", config.d_model},
                     {"n_layer", config.n_layer},
                     {"n_head", config.n_head},
                     {"n_inner", config.d_ff > 0 ? OrderedJson(config.d_ff) : OrderedJson(nullptr)},
                     {"activation_function", "gelu_new"},
                     {"layer_norm_epsilon", 1e-5},
                     {"embd_pdrop", config.dropout},
                     {"resid_pdrop", config.dropout},
                     {"attn_pdrop", 0.0},
                     {"initializer_range", config.init_std},
                     {"scale_attn_weights", true},
                     {"tie_word_embeddings", true}};
  return json_text(root, 2) + "\n";
}

std::map<std::string, Tensor> from_hf_gpt2(
    const ModelConfig& config, const std::vector<std::pair<std::string, Tensor>>& hf) {
  if (config.block != "transformer")
    TN_THROW(CheckpointError, "cannot import GPT-2 weights into block type '", config.block, "'");
  const std::int64_t c = config.d_model, f = config.ff_width(), hs = config.head_size();
  std::map<std::string, Tensor> theirs(hf.begin(), hf.end());
  // GPT2LMHeadModel's files name the weights "transformer.wte.weight", ...; GPT2Model's
  // (OpenAI's released model.safetensors among them) "wte.weight": read both.
  if (!theirs.count("transformer.wte.weight") && theirs.count("wte.weight")) {
    std::map<std::string, Tensor> prefixed;
    for (auto& [name, tensor] : theirs)
      prefixed.emplace(name == "lm_head.weight" ? name : "transformer." + name, tensor);
    theirs = std::move(prefixed);
  }
  auto take = [&](const std::string& name, const Shape& shape) {
    const auto it = theirs.find(name);
    TN_CHECK_AS(CheckpointError, it != theirs.end(), "GPT-2 weights have no '", name, "'");
    TN_CHECK_AS(CheckpointError, it->second.shape() == shape && it->second.dtype() == DType::F32,
                "GPT-2 weight '", name, "' is ", it->second.str(), ", this model needs f32",
                shape_str(shape));
    Tensor t = it->second;
    theirs.erase(it);
    return t;
  };
  std::map<std::string, Tensor> ours;
  // The padding rows of the embedding never reach the loss; they start at zero.
  Tensor wte = Tensor::zeros({config.padded_vocab_size(), c});
  wte.slice(0, 0, config.vocab_size)
      .copy_from(take("transformer.wte.weight", {config.vocab_size, c}));
  ours["wte"] = wte;
  ours["wpe"] = take("transformer.wpe.weight", {config.seq_len, c}).clone();
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    const std::string o = "h." + std::to_string(i) + ".";
    const std::string t = "transformer.h." + std::to_string(i) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      ours[o + ln + ".weight"] = take(t + ln + ".weight", {c}).clone();
      ours[o + ln + ".bias"] = take(t + ln + ".bias", {c}).clone();
    }
    ours[o + "attn.qkv.weight"] =
        regroup_qkv(transpose(take(t + "attn.c_attn.weight", {c, 3 * c})), config.n_head, hs, true);
    ours[o + "attn.qkv.bias"] =
        regroup_qkv(take(t + "attn.c_attn.bias", {3 * c}), config.n_head, hs, true);
    ours[o + "attn.proj.weight"] = transpose(take(t + "attn.c_proj.weight", {c, c}));
    ours[o + "attn.proj.bias"] = take(t + "attn.c_proj.bias", {c}).clone();
    ours[o + "mlp.fc.weight"] = transpose(take(t + "mlp.c_fc.weight", {c, f}));
    ours[o + "mlp.fc.bias"] = take(t + "mlp.c_fc.bias", {f}).clone();
    ours[o + "mlp.proj.weight"] = transpose(take(t + "mlp.c_proj.weight", {f, c}));
    ours[o + "mlp.proj.bias"] = take(t + "mlp.c_proj.bias", {c}).clone();
  }
  ours["ln_f.weight"] = take("transformer.ln_f.weight", {c}).clone();
  ours["ln_f.bias"] = take("transformer.ln_f.bias", {c}).clone();
  // GPT-2's head is tied to wte; some files store it anyway. One that differs is an untied
  // model's, which this one cannot compute.
  if (theirs.count("lm_head.weight")) {
    const Tensor head = take("lm_head.weight", {config.vocab_size, c});
    const Tensor embedding = wte.slice(0, 0, config.vocab_size).contiguous();
    TN_CHECK_AS(CheckpointError,
                std::memcmp(head.raw_data(), embedding.raw_data(), head.nbytes()) == 0,
                "GPT-2 weights have an 'lm_head.weight' that differs from "
                "'transformer.wte.weight': an untied head, but this model ties its head to wte");
  }
  for (const auto& [name, tensor] : theirs)
    if (name.find(".attn.bias") == std::string::npos &&
        name.find(".attn.masked_bias") == std::string::npos)
      TN_THROW(CheckpointError, "GPT-2 weights have '", name,
               "', which this model has no place for");
  return ours;
}

void check_hf_gpt2_config(const ModelConfig& config, const std::string& json,
                          const std::string& path) {
  const Json root = read_hf_json_object(json, path);
  auto given = [&](const char* key) { return hf_given(root, key); };
  check_hf_model_kind(root, path, "gpt2", "gpt2", "GPT2");

  // transformers' GPT2Config defaults, and its aliases (attribute_map).
  check_hf_size(root, path, "n_head", 12, config.n_head, "model.n_head", "num_attention_heads");
  check_hf_size(root, path, "n_layer", 12, config.n_layer, "model.n_layer", "num_hidden_layers");
  check_hf_size(root, path, "n_embd", 768, config.d_model, "model.d_model", "hidden_size");
  check_hf_size(root, path, "vocab_size", 50257, config.vocab_size, "model.vocab_size");
  check_hf_size(root, path, "n_positions", 1024, config.seq_len, "model.seq_len",
                "max_position_embeddings");
  // n_inner left out is 4 x n_embd, which (checked above) is 4 x model.d_model.
  check_hf_size(root, path, "n_inner", 4 * config.d_model, config.ff_width(),
                "the MLP width (model.d_ff, or 4 x model.d_model)");

  // Ours is GPT-2's tanh GELU (kernels/gelu.h), which transformers calls gelu_new.
  if (const Json* activation = given("activation_function")) {
    TN_CHECK_AS(CheckpointError, hf_text(*activation) == "gelu_new", "'", path,
                "' gives activation_function '", hf_text(*activation),
                "', but this model computes GPT-2's tanh GELU ('gelu_new')");
  }

  // The math the model computes and transformers' GPT-2 makes configurable: each must be ours.
  auto check_flag = [&](const char* key, bool ours, const char* what) {
    const Json* node = given(key);
    if (node == nullptr) return;
    TN_CHECK_AS(CheckpointError, node->is_boolean(), "'", path, "': ", key,
                " is not true or false");
    TN_CHECK_AS(CheckpointError, node->get<bool>() == ours, "'", path, "' gives ", key, " ",
                node->get<bool>() ? "true" : "false", ", but this model ", what);
  };
  check_flag("tie_word_embeddings", true, "ties its output head to wte");
  check_flag("scale_attn_weights", true, "scales attention scores by 1/sqrt(head size)");
  check_flag("scale_attn_by_inverse_layer_idx", false,
             "does not scale attention scores by the layer's index");
  if (const Json* eps = given("layer_norm_epsilon")) {
    TN_CHECK_AS(CheckpointError, eps->is_number(), "'", path,
                "': layer_norm_epsilon is not a number");
    // A float32 round trip of either value is not a mismatch.
    TN_CHECK_AS(CheckpointError,
                std::abs(eps->get<double>() - double{kLayerNormEps}) <= 1e-6 * kLayerNormEps,
                "'", path, "' gives layer_norm_epsilon ", eps->get<double>(),
                ", but this model's LayerNorm epsilon is 1e-05");
  }
}

}  // namespace ternion
