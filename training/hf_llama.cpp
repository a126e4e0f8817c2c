#include "training/hf_llama.h"

#include "training/hf_interop.h"
#include "training/hf_parameter_source.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <set>

namespace ternion {

namespace {

// `rows` rows of one of HF's separate weights (`part`, from `part_row`) that sit at
// `fused_row` of our fused weight.
struct RowBlock {
  int part;
  std::int64_t part_row, fused_row, rows;
};

// Our QKV: per key/value group g, the r query heads of the group, then key g, then value g.
// Parts: 0 = q_proj, 1 = k_proj, 2 = v_proj.
std::vector<RowBlock> qkv_blocks(const ModelConfig& config) {
  const std::int64_t hs = config.head_size(), groups = config.kv_heads();
  const std::int64_t r = config.n_head / groups;
  std::vector<RowBlock> blocks;
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t base = g * (r + 2) * hs;
    blocks.push_back({0, g * r * hs, base, r * hs});
    blocks.push_back({1, g * hs, base + r * hs, hs});
    blocks.push_back({2, g * hs, base + (r + 1) * hs, hs});
  }
  return blocks;
}

// Our gate_up: row 2j is gate_proj's row j, row 2j + 1 up_proj's. Parts: 0 = gate, 1 = up.
std::vector<RowBlock> gate_up_blocks(const ModelConfig& config) {
  std::vector<RowBlock> blocks;
  for (std::int64_t j = 0; j < config.ff_width(); ++j) {
    blocks.push_back({0, j, 2 * j, 1});
    blocks.push_back({1, j, 2 * j + 1, 1});
  }
  return blocks;
}

// Copies `rows` rows between two contiguous tensors of one dtype and row width.
void copy_rows(const Tensor& from, std::int64_t from_row, const Tensor& to, std::int64_t to_row,
               std::int64_t rows) {
  const std::size_t row_bytes = from.nbytes() / static_cast<std::size_t>(from.size(0));
  std::memcpy(
      static_cast<char*>(to.raw_data()) + static_cast<std::size_t>(to_row) * row_bytes,
      static_cast<const char*>(from.raw_data()) + static_cast<std::size_t>(from_row) * row_bytes,
      static_cast<std::size_t>(rows) * row_bytes);
}

// Our fused weight (contiguous) -> HF's parts of `part_rows` rows each.
std::vector<Tensor> split_rows(const Tensor& fused, const std::vector<RowBlock>& blocks,
                               const std::vector<std::int64_t>& part_rows) {
  std::vector<Tensor> parts;
  for (std::int64_t rows : part_rows)
    parts.push_back(Tensor::empty({rows, fused.size(1)}, fused.dtype()));
  for (const RowBlock& b : blocks) copy_rows(fused, b.fused_row, parts[b.part], b.part_row, b.rows);
  return parts;
}

// HF's parts (contiguous) -> our fused weight.
Tensor fuse_rows(const std::vector<Tensor>& parts, const std::vector<RowBlock>& blocks) {
  std::int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.size(0);
  Tensor fused = Tensor::empty({rows, parts[0].size(1)}, parts[0].dtype());
  for (const RowBlock& b : blocks) copy_rows(parts[b.part], b.part_row, fused, b.fused_row, b.rows);
  return fused;
}

void check_sizes(const ModelConfig& config, const char* direction) {
  TN_CHECK_AS(CheckpointError, config.family == "llama", "cannot ", direction,
              " Llama weights for model.family '", config.family, "'");
  TN_CHECK(config.n_head > 0 && config.head_size() * config.n_head == config.d_model, "n_head ",
           config.n_head, " does not divide d_model ", config.d_model);
  TN_CHECK(config.kv_heads() > 0 && config.n_head % config.kv_heads() == 0, "n_kv_head ",
           config.kv_heads(), " does not divide n_head ", config.n_head);
}

// The shortest decimal that reads back as `value`, always with a fraction or exponent so that
// a float field never reads as an integer: 500000.0 (not 5e+05), 1e-05, 0.02.
}  // namespace

std::vector<std::pair<std::string, Tensor>> to_hf_llama(
    const ModelConfig& config, const std::map<std::string, Tensor>& params) {
  check_sizes(config, "export");
  const std::int64_t c = config.d_model, f = config.ff_width(), hs = config.head_size();
  const std::int64_t q_rows = config.n_head * hs, kv_rows = config.kv_heads() * hs;
  ParameterSource source(params, "Llama");
  std::vector<std::pair<std::string, Tensor>> out;
  auto as_is = [&](const std::string& ours, const std::string& theirs, const Shape& shape) {
    out.emplace_back(theirs, source.take(ours, shape).clone());
  };

  const Tensor wte = source.take("wte", {config.padded_vocab_size(), c});
  out.emplace_back("model.embed_tokens.weight", wte.slice(0, 0, config.vocab_size).clone());
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    const std::string ours = "h." + std::to_string(i) + ".";
    const std::string theirs = "model.layers." + std::to_string(i) + ".";
    // transformers' state_dict order: self_attn, mlp, then the two norms.
    const auto qkv = split_rows(source.take(ours + "attn.qkv.weight", {q_rows + 2 * kv_rows, c}),
                                qkv_blocks(config), {q_rows, kv_rows, kv_rows});
    out.emplace_back(theirs + "self_attn.q_proj.weight", qkv[0]);
    out.emplace_back(theirs + "self_attn.k_proj.weight", qkv[1]);
    out.emplace_back(theirs + "self_attn.v_proj.weight", qkv[2]);
    as_is(ours + "attn.proj.weight", theirs + "self_attn.o_proj.weight", {c, q_rows});
    const auto gate_up = split_rows(source.take(ours + "mlp.gate_up.weight", {2 * f, c}),
                                    gate_up_blocks(config), {f, f});
    out.emplace_back(theirs + "mlp.gate_proj.weight", gate_up[0]);
    out.emplace_back(theirs + "mlp.up_proj.weight", gate_up[1]);
    as_is(ours + "mlp.down.weight", theirs + "mlp.down_proj.weight", {c, f});
    as_is(ours + "attn_norm.weight", theirs + "input_layernorm.weight", {c});
    as_is(ours + "mlp_norm.weight", theirs + "post_attention_layernorm.weight", {c});
  }
  as_is("norm.weight", "model.norm.weight", {c});
  if (!config.tie_embeddings) {
    const Tensor head = source.take("lm_head.weight", {config.padded_vocab_size(), c});
    out.emplace_back("lm_head.weight", head.slice(0, 0, config.vocab_size).clone());
  }
  source.check_all_taken();
  return out;
}

std::map<std::string, Tensor> from_hf_llama(const ModelConfig& config,
                                            const std::vector<std::pair<std::string, Tensor>>& hf) {
  check_sizes(config, "import");
  const std::int64_t c = config.d_model, f = config.ff_width(), hs = config.head_size();
  const std::int64_t q_rows = config.n_head * hs, kv_rows = config.kv_heads() * hs;
  std::map<std::string, Tensor> theirs(hf.begin(), hf.end());
  auto take = [&](const std::string& name, const Shape& shape) {
    const auto it = theirs.find(name);
    TN_CHECK_AS(CheckpointError, it != theirs.end(), "Llama weights have no '", name, "'");
    TN_CHECK_AS(CheckpointError, it->second.shape() == shape && it->second.dtype() == DType::F32,
                "Llama weight '", name, "' is ", it->second.str(), ", this model needs f32",
                shape_str(shape));
    Tensor t = it->second.contiguous();
    theirs.erase(it);
    return t;
  };
  // The padding rows of the embedding and head never reach the loss; they start at zero.
  auto padded_vocab = [&](const Tensor& rows) {
    Tensor t = Tensor::zeros({config.padded_vocab_size(), c});
    t.slice(0, 0, config.vocab_size).copy_from(rows);
    return t;
  };

  std::map<std::string, Tensor> ours;
  const Tensor embed = take("model.embed_tokens.weight", {config.vocab_size, c});
  ours["wte"] = padded_vocab(embed);
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    const std::string o = "h." + std::to_string(i) + ".";
    const std::string t = "model.layers." + std::to_string(i) + ".";
    ours[o + "attn_norm.weight"] = take(t + "input_layernorm.weight", {c}).clone();
    ours[o + "attn.qkv.weight"] = fuse_rows({take(t + "self_attn.q_proj.weight", {q_rows, c}),
                                             take(t + "self_attn.k_proj.weight", {kv_rows, c}),
                                             take(t + "self_attn.v_proj.weight", {kv_rows, c})},
                                            qkv_blocks(config));
    ours[o + "attn.proj.weight"] = take(t + "self_attn.o_proj.weight", {c, q_rows}).clone();
    ours[o + "mlp_norm.weight"] = take(t + "post_attention_layernorm.weight", {c}).clone();
    ours[o + "mlp.gate_up.weight"] = fuse_rows(
        {take(t + "mlp.gate_proj.weight", {f, c}), take(t + "mlp.up_proj.weight", {f, c})},
        gate_up_blocks(config));
    ours[o + "mlp.down.weight"] = take(t + "mlp.down_proj.weight", {c, f}).clone();
  }
  ours["norm.weight"] = take("model.norm.weight", {c}).clone();
  if (!config.tie_embeddings) {
    ours["lm_head.weight"] = padded_vocab(take("lm_head.weight", {config.vocab_size, c}));
  } else if (theirs.count("lm_head.weight")) {
    // Some writers store the tied head; a head that differs is an untied model's.
    const Tensor head = take("lm_head.weight", {config.vocab_size, c});
    TN_CHECK_AS(
        CheckpointError, std::memcmp(head.raw_data(), embed.raw_data(), head.nbytes()) == 0,
        "Llama weights have an 'lm_head.weight' that differs from 'model.embed_tokens.weight', "
        "but model.tie_embeddings is true");
  }
  for (const auto& [name, tensor] : theirs) {
    const std::string buffer = "rotary_emb.inv_freq";  // recomputed from rope_theta, not learned
    const bool is_buffer = name.size() >= buffer.size() &&
                           name.compare(name.size() - buffer.size(), buffer.size(), buffer) == 0;
    if (!is_buffer)
      TN_THROW(CheckpointError, "Llama weights have '", name,
               "', which this model has no place for");
  }
  return ours;
}

std::string hf_llama_config_json(const ModelConfig& config) {
  // transformers' rope_scaling of rope_type "llama3", or null.
  OrderedJson rope_scaling = nullptr;
  if (config.rope_scaling_factor > 0)
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", config.rope_scaling_factor},
                    {"low_freq_factor", config.rope_scaling_low_freq_factor},
                    {"high_freq_factor", config.rope_scaling_high_freq_factor},
                    {"original_max_position_embeddings", config.rope_scaling_original_context}};
  const OrderedJson root = {{"architectures", {"LlamaForCausalLM"}},
                     {"model_type", "llama"},
                     {"vocab_size", config.vocab_size},
                     {"hidden_size", config.d_model},
                     {"intermediate_size", config.ff_width()},
                     {"num_hidden_layers", config.n_layer},
                     {"num_attention_heads", config.n_head},
                     {"num_key_value_heads", config.kv_heads()},
                     {"head_dim", config.head_size()},
                     {"max_position_embeddings", config.context_made_for()},
                     {"hidden_act", "silu"},
                     {"rms_norm_eps", config.norm_eps},
                     {"rope_theta", config.rope_theta},
                     {"rope_scaling", rope_scaling},
                     {"attention_bias", false},
                     {"attention_dropout", 0.0},
                     {"mlp_bias", false},
                     {"initializer_range", config.init_std},
                     {"tie_word_embeddings", config.tie_embeddings},
                     {"torch_dtype", "float32"}};
  return json_text(root, 2) + "\n";
}

void check_hf_llama_config(const ModelConfig& config, const std::string& json,
                           const std::string& path) {
  const Json root = read_hf_json_object(json, path);

  auto number = [&](const Json& node, const std::string& label) {
    TN_CHECK_AS(CheckpointError, node.is_number(), "'", path, "': ", label, " is not a number");
    return node.get<double>();
  };
  auto boolean = [&](const Json& node, const std::string& label) {
    TN_CHECK_AS(CheckpointError, node.is_boolean(), "'", path, "': ", label,
                " is not true or false");
    return node.get<bool>();
  };

  check_hf_model_kind(root, path, "llama", "llama", "Llama");

  // transformers' LlamaConfig defaults where a size is left out.
  check_hf_size(root, path, "hidden_size", 4096, config.d_model, "model.d_model");
  check_hf_size(root, path, "num_hidden_layers", 32, config.n_layer, "model.n_layer");
  check_hf_size(root, path, "num_attention_heads", 32, config.n_head, "model.n_head");
  check_hf_size(root, path, "vocab_size", 32000, config.vocab_size, "model.vocab_size");
  check_hf_size(root, path, "intermediate_size", 11008, config.ff_width(),
                "the MLP width (model.d_ff, or 4 x model.d_model)");
  // head_dim left out is hidden_size / num_attention_heads, each checked above.
  check_hf_size(root, path, "head_dim", config.head_size(), config.head_size(),
                "the head size (model.d_model / model.n_head)");
  // num_key_value_heads left out is num_attention_heads.
  const std::int64_t heads = hf_size(root, path, "num_attention_heads", 32).value;
  HfSize kv_heads = hf_size(root, path, "num_key_value_heads", heads);
  if (hf_given(root, "num_key_value_heads") == nullptr)
    kv_heads.label = "no num_key_value_heads, so its key/value heads are num_attention_heads";
  TN_CHECK_AS(CheckpointError, kv_heads.value == config.kv_heads(), "'", path, "' gives ",
              kv_heads.label, " ", kv_heads.value, ", but model.n_kv_head (0 = model.n_head) is ",
              config.kv_heads());
  // Rotary positions are not weights: a shorter context than the checkpoint's is fine.
  const HfSize context = hf_size(root, path, "max_position_embeddings", 2048);
  TN_CHECK_AS(CheckpointError, config.context_made_for() <= context.value, "'", path, "' gives ",
              context.label, " ", context.value, ", but ",
              config.max_context > 0 ? "model.max_context" : "model.seq_len", " is ",
              config.context_made_for(), ", longer than the model was made for");

  auto check_close = [&](const std::string& label, double theirs, double ours,
                         const char* our_key) {
    // A float32 round trip of either value is not a mismatch.
    TN_CHECK_AS(CheckpointError, std::abs(theirs - ours) <= 1e-6 * std::abs(ours), "'", path,
                "' gives ", label, " ", theirs, ", but ", our_key, " is ", ours);
  };
  if (const auto act = hf_given(root, "hidden_act"))
    TN_CHECK_AS(CheckpointError, hf_text(*act) == "silu", "'", path, "' gives hidden_act '",
                hf_text(*act), "', but this model computes SwiGLU with SiLU ('silu')");
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (const auto bias = hf_given(root, key))
      TN_CHECK_AS(CheckpointError, !boolean(*bias, key), "'", path, "' gives ", key,
                  " true, but this model's projections have no biases");

  // transformers 4.x keeps rope_theta at the top level and scaling in rope_scaling; 5.x moves
  // both into rope_parameters (reading rope_scaling as its old name). Every theta given counts.
  bool theta_given = false;
  auto check_rope = [&](const Json& map, const std::string& prefix) {
    if (const auto theta = hf_given(map, "rope_theta")) {
      check_close(prefix + "rope_theta", number(*theta, prefix + "rope_theta"), config.rope_theta,
                  "model.rope_theta");
      theta_given = true;
    }
    if (const auto factor = hf_given(map, "partial_rotary_factor"))
      TN_CHECK_AS(CheckpointError, number(*factor, prefix + "partial_rotary_factor") == 1.0, "'",
                  path, "' gives ", prefix, "partial_rotary_factor ", hf_text(*factor),
                  ", but ternion rotates every feature of a head");
  };
  check_rope(root, "");
  const bool scaled = config.rope_scaling_factor > 0;
  bool scaling_given = false;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const auto rope = hf_given(root, key);
    if (!rope) continue;
    TN_CHECK_AS(CheckpointError, rope->is_object(), "'", path, "': ", key,
                " is not a JSON object");
    const Json* type = hf_given(*rope, "rope_type");
    if (type == nullptr) type = hf_given(*rope, "type");
    const std::string name = type ? hf_text(*type) : "default";
    const std::string prefix = std::string(key) + ".";
    TN_CHECK_AS(CheckpointError, name == "default" || name == "llama3", "'", path, "' gives ",
                key, " with rope_type '", name,
                "', but ternion implements rotary embeddings plain (rope_type 'default') or with "
                "Llama 3's scaling ('llama3') only");
    check_rope(*rope, prefix);
    if (name != "llama3") continue;
    scaling_given = true;
    TN_CHECK_AS(CheckpointError, scaled, "'", path, "' gives ", key,
                " with rope_type 'llama3', but model.rope_scaling_factor is 0 (no scaling)");
    // transformers' defaults where a field is left out are none: every field is required.
    auto field = [&](const char* name) {
      const auto node = hf_given(*rope, name);
      TN_CHECK_AS(CheckpointError, node != nullptr, "'", path, "': ", prefix, name,
                  " is missing (rope_type 'llama3' needs it)");
      return number(*node, prefix + name);
    };
    check_close(prefix + "factor", field("factor"), config.rope_scaling_factor,
                "model.rope_scaling_factor");
    check_close(prefix + "low_freq_factor", field("low_freq_factor"),
                config.rope_scaling_low_freq_factor, "model.rope_scaling_low_freq_factor");
    check_close(prefix + "high_freq_factor", field("high_freq_factor"),
                config.rope_scaling_high_freq_factor, "model.rope_scaling_high_freq_factor");
    check_close(prefix + "original_max_position_embeddings",
                field("original_max_position_embeddings"),
                static_cast<double>(config.rope_scaling_original_context),
                "model.rope_scaling_original_context");
  }
  TN_CHECK_AS(CheckpointError, scaling_given || !scaled, "'", path,
              "' gives no Llama 3 rotary scaling (rope_scaling), but model.rope_scaling_factor is ",
              config.rope_scaling_factor);

  // A key left out is read as transformers' LlamaConfig default, as transformers reads it.
  if (!theta_given)
    check_close("no rope_theta, so transformers' default rope_theta", 10000, config.rope_theta,
                "model.rope_theta");
  const auto tie = hf_given(root, "tie_word_embeddings");
  const bool tied = tie ? boolean(*tie, "tie_word_embeddings") : false;
  TN_CHECK_AS(CheckpointError, tied == config.tie_embeddings, "'", path, "' gives ",
              tie ? "" : "no tie_word_embeddings, so transformers' default ",
              "tie_word_embeddings ", tied ? "true" : "false", ", but model.tie_embeddings is ",
              config.tie_embeddings ? "true" : "false");
  if (const auto eps = hf_given(root, "rms_norm_eps"))
    check_close("rms_norm_eps", number(*eps, "rms_norm_eps"), config.norm_eps, "model.norm_eps");
  else
    check_close("no rms_norm_eps, so transformers' default", 1e-6, config.norm_eps,
                "model.norm_eps");
}

}  // namespace ternion
