// The Hugging Face Llama mapping: the round trip through HF's names is the identity for every
// grouping of heads, tied and untied; q/k/v and gate/up rows land where the layout says (rows
// filled with their own index); every refusal names what is wrong; config.json as transformers
// 4.x and 5.x write it is understood, Llama 3's rotary scaling is checked field by field and
// other scalings are refused.
#include "training/hf_llama.h"

#include <gtest/gtest.h>

#include "framework/error.h"
#include "framework/strict_json.h"
#include "test_util.h"
#include "training/hf_export.h"
#include "training_test_support.h"

namespace ternion {
namespace {

// check_hf_llama_config of a config.json that may leave the model's sizes out: they are
// filled in from the model (sized_hf_config), so a test of other keys meets no default size.
void check_partial(const ModelConfig& config, const std::string& json, const std::string& path) {
  check_hf_llama_config(config, testing_support::sized_hf_config(config, json), path);
}

ModelConfig tiny_config(std::int64_t n_kv_head, bool tied) {
  ModelConfig c;
  c.family = "llama";
  c.vocab_size = 29;
  c.vocab_pad_multiple = 8;  // 32 rows, 3 of them padding
  c.seq_len = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = n_kv_head;
  c.d_model = 16;
  c.d_ff = 24;
  c.tie_embeddings = tied;
  return c;
}

// Our whole parameters, random, by the names of the layout in training/hf_llama.h; the
// vocabulary's padding rows zero, as the model keeps them.
std::map<std::string, Tensor> random_params(const ModelConfig& c, std::uint64_t seed) {
  const std::int64_t d = c.d_model, hs = c.head_size(), f = c.ff_width();
  auto random = [&](const Shape& shape) {
    return Tensor::from_vector(
        test::random_floats(static_cast<std::size_t>(shape_numel(shape)), ++seed), shape);
  };
  auto vocab_rows = [&]() {
    Tensor t = random({c.padded_vocab_size(), d});
    t.slice(0, c.vocab_size, c.padded_vocab_size() - c.vocab_size).zero();
    return t;
  };
  std::map<std::string, Tensor> p;
  p["wte"] = vocab_rows();
  for (std::int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    p[h + "attn_norm.weight"] = random({d});
    p[h + "attn.qkv.weight"] = random({(c.n_head + 2 * c.kv_heads()) * hs, d});
    p[h + "attn.proj.weight"] = random({d, c.n_head * hs});
    p[h + "mlp_norm.weight"] = random({d});
    p[h + "mlp.gate_up.weight"] = random({2 * f, d});
    p[h + "mlp.down.weight"] = random({d, f});
  }
  p["norm.weight"] = random({d});
  if (!c.tie_embeddings) p["lm_head.weight"] = vocab_rows();
  return p;
}

const Tensor& find(const std::vector<std::pair<std::string, Tensor>>& hf, const std::string& name) {
  for (const auto& [n, t] : hf)
    if (n == name) return t;
  throw std::runtime_error("no " + name);
}

// A [rows, cols] f32 tensor whose row i holds `base + i` in every column.
Tensor rows_numbered(std::int64_t rows, std::int64_t cols, float base) {
  std::vector<float> v;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) v.push_back(base + static_cast<float>(r));
  return Tensor::from_vector(v, {rows, cols});
}

// Each row's value, for a tensor made of rows_numbered pieces.
std::vector<float> row_values(const Tensor& t) {
  const std::vector<float> all = t.to_vector();
  std::vector<float> out;
  for (std::int64_t r = 0; r < t.size(0); ++r)
    out.push_back(all[static_cast<std::size_t>(r * t.size(1))]);
  return out;
}

template <class F>
void expect_checkpoint_error(F&& f, const std::vector<std::string>& expected) {
  try {
    f();
    ADD_FAILURE() << "accepted, expected '" << expected.front() << "'";
  } catch (const CheckpointError& e) {
    for (const std::string& part : expected)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
  }
}

TEST(HfLlama, RoundTripIsTheIdentityForEveryHeadGrouping) {
  for (std::int64_t kv : {2, 4, 1})
    for (bool tied : {false, true}) {
      SCOPED_TRACE("n_kv_head " + std::to_string(kv) + (tied ? ", tied" : ", untied"));
      const ModelConfig config = tiny_config(kv, tied);
      const auto params = random_params(config, 10 * static_cast<std::uint64_t>(kv) + tied);
      const auto hf = to_hf_llama(config, params);
      const auto back = from_hf_llama(config, hf);
      ASSERT_EQ(back.size(), params.size());
      for (const auto& [name, tensor] : params) {
        ASSERT_TRUE(back.count(name)) << name;
        ASSERT_EQ(back.at(name).shape(), tensor.shape()) << name;
        test::expect_bitwise_equal(name, back.at(name).to_vector(), tensor.to_vector());
      }
    }
}

TEST(HfLlama, NamesShapesAndOrderAreTransformers) {
  for (bool tied : {false, true}) {
    const ModelConfig config = tiny_config(2, tied);
    const auto hf = to_hf_llama(config, random_params(config, 1));
    const std::int64_t c = 16, f = 24, hs = 4;
    std::vector<std::pair<std::string, Shape>> want = {{"model.embed_tokens.weight", {29, c}}};
    for (int i = 0; i < 2; ++i) {
      const std::string l = "model.layers." + std::to_string(i) + ".";
      for (const auto& [name, shape] :
           std::vector<std::pair<std::string, Shape>>{{"self_attn.q_proj.weight", {4 * hs, c}},
                                                      {"self_attn.k_proj.weight", {2 * hs, c}},
                                                      {"self_attn.v_proj.weight", {2 * hs, c}},
                                                      {"self_attn.o_proj.weight", {c, 4 * hs}},
                                                      {"mlp.gate_proj.weight", {f, c}},
                                                      {"mlp.up_proj.weight", {f, c}},
                                                      {"mlp.down_proj.weight", {c, f}},
                                                      {"input_layernorm.weight", {c}},
                                                      {"post_attention_layernorm.weight", {c}}})
        want.emplace_back(l + name, shape);
    }
    want.emplace_back("model.norm.weight", Shape{c});
    if (!tied) want.emplace_back("lm_head.weight", Shape{29, c});
    ASSERT_EQ(hf.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(hf[i].first, want[i].first);
      EXPECT_EQ(hf[i].second.shape(), want[i].second) << want[i].first;
      EXPECT_TRUE(hf[i].second.is_contiguous()) << want[i].first;
    }
  }
}

// Rows filled with their own index (q_proj i, k_proj 100 + i, v_proj 200 + i): ours holds, per
// key/value group, the group's query heads, then its key head, then its value head.
TEST(HfLlama, QkvRowsAreGroupedByKeyValueHead) {
  ModelConfig config = tiny_config(2, false);
  config.d_model = 8;  // head size 2
  config.n_layer = 1;
  struct Case {
    std::int64_t kv;
    std::vector<float> rows;
  };
  const std::vector<Case> cases = {
      {2, {0, 1, 2, 3, 100, 101, 200, 201, 4, 5, 6, 7, 102, 103, 202, 203}},
      {1, {0, 1, 2, 3, 4, 5, 6, 7, 100, 101, 200, 201}},
      {4, {0, 1, 100, 101, 200, 201, 2, 3, 102, 103, 202, 203,
           4, 5, 104, 105, 204, 205, 6, 7, 106, 107, 206, 207}}};
  for (const Case& k : cases) {
    SCOPED_TRACE("n_kv_head " + std::to_string(k.kv));
    config.n_kv_head = k.kv;
    auto hf = to_hf_llama(config, random_params(config, 3));
    for (auto& [name, t] : hf) {
      if (name == "model.layers.0.self_attn.q_proj.weight") t = rows_numbered(8, 8, 0);
      if (name == "model.layers.0.self_attn.k_proj.weight") t = rows_numbered(2 * k.kv, 8, 100);
      if (name == "model.layers.0.self_attn.v_proj.weight") t = rows_numbered(2 * k.kv, 8, 200);
    }
    const auto ours = from_hf_llama(config, hf);
    EXPECT_EQ(row_values(ours.at("h.0.attn.qkv.weight")), k.rows);
    // And back: each of HF's weights is its own numbered rows again.
    const auto again = to_hf_llama(config, ours);
    EXPECT_EQ(row_values(find(again, "model.layers.0.self_attn.q_proj.weight")),
              row_values(rows_numbered(8, 1, 0)));
    EXPECT_EQ(row_values(find(again, "model.layers.0.self_attn.k_proj.weight")),
              row_values(rows_numbered(2 * k.kv, 1, 100)));
    EXPECT_EQ(row_values(find(again, "model.layers.0.self_attn.v_proj.weight")),
              row_values(rows_numbered(2 * k.kv, 1, 200)));
  }
}

TEST(HfLlama, GateAndUpRowsInterleave) {
  ModelConfig config = tiny_config(2, false);
  config.d_ff = 3;
  config.n_layer = 1;
  auto hf = to_hf_llama(config, random_params(config, 4));
  for (auto& [name, t] : hf) {
    if (name == "model.layers.0.mlp.gate_proj.weight") t = rows_numbered(3, 16, 10);
    if (name == "model.layers.0.mlp.up_proj.weight") t = rows_numbered(3, 16, 20);
  }
  const auto ours = from_hf_llama(config, hf);
  EXPECT_EQ(row_values(ours.at("h.0.mlp.gate_up.weight")),
            (std::vector<float>{10, 20, 11, 21, 12, 22}));
  // The embedding's and the head's real rows are HF's, the padding rows zero.
  for (const char* name : {"wte", "lm_head.weight"}) {
    const std::vector<float> v = ours.at(name).to_vector();
    const std::string theirs = std::string(name) == "wte" ? "model.embed_tokens.weight" : name;
    test::expect_bitwise_equal(name, std::vector<float>(v.begin(), v.begin() + 29 * 16),
                               find(hf, theirs).to_vector());
    EXPECT_EQ(std::vector<float>(v.begin() + 29 * 16, v.end()), std::vector<float>(3 * 16, 0.0f))
        << name;
  }
}

TEST(HfLlama, ExportRefusesWhatItCannotMap) {
  const ModelConfig config = tiny_config(2, false);
  const auto params = random_params(config, 5);
  auto missing = params;
  missing.erase("h.1.mlp.down.weight");
  expect_checkpoint_error([&] { to_hf_llama(config, missing); },
                          {"'h.1.mlp.down.weight' is missing"});
  auto wrong_shape = params;
  wrong_shape["h.0.attn.qkv.weight"] = Tensor::zeros({48, 16});  // 4 kv heads' worth
  expect_checkpoint_error([&] { to_hf_llama(config, wrong_shape); },
                          {"'h.0.attn.qkv.weight' is [48, 16], expected [32, 16]"});
  auto extra = params;
  extra["h.0.attn.qkv.bias"] = Tensor::zeros({32});
  expect_checkpoint_error([&] { to_hf_llama(config, extra); },
                          {"'h.0.attn.qkv.bias' has no Llama counterpart"});
  // A tied model has no lm_head.weight to export; an untied one must have it.
  expect_checkpoint_error([&] { to_hf_llama(tiny_config(2, true), params); },
                          {"'lm_head.weight' has no Llama counterpart"});
  expect_checkpoint_error([&] { to_hf_llama(config, random_params(tiny_config(2, true), 5)); },
                          {"'lm_head.weight' is missing"});
  ModelConfig gpt2 = config;
  gpt2.family = "gpt2";
  expect_checkpoint_error([&] { to_hf_llama(gpt2, params); }, {"model.family 'gpt2'"});
}

TEST(HfLlama, ImportRefusesWhatDoesNotFit) {
  const ModelConfig config = tiny_config(2, false);
  const auto hf = to_hf_llama(config, random_params(config, 6));
  auto with = [&](const std::string& name, const Tensor& t) {
    auto out = hf;
    bool replaced = false;
    for (auto& [n, v] : out)
      if (n == name) v = t, replaced = true;
    if (!replaced) out.emplace_back(name, t);
    return out;
  };
  auto without = [&](const std::string& name) {
    auto out = hf;
    std::erase_if(out, [&](const auto& entry) { return entry.first == name; });
    return out;
  };
  expect_checkpoint_error(
      [&] { from_hf_llama(config, without("model.layers.1.self_attn.k_proj.weight")); },
      {"Llama weights have no 'model.layers.1.self_attn.k_proj.weight'"});
  // The k_proj of 4 key/value heads, given to a model of 2.
  expect_checkpoint_error(
      [&] {
        from_hf_llama(config,
                      with("model.layers.0.self_attn.k_proj.weight", Tensor::zeros({16, 16})));
      },
      {"'model.layers.0.self_attn.k_proj.weight' is f32[16, 16]", "needs f32[8, 16]"});
  expect_checkpoint_error(
      [&] { from_hf_llama(config, with("model.norm.weight", Tensor::zeros({16}, DType::BF16))); },
      {"'model.norm.weight' is bf16[16]"});
  expect_checkpoint_error(
      [&] {
        from_hf_llama(config, with("model.layers.0.self_attn.q_proj.bias", Tensor::zeros({16})));
      },
      {"'model.layers.0.self_attn.q_proj.bias', which this model has no place for"});
  expect_checkpoint_error([&] { from_hf_llama(config, without("lm_head.weight")); },
                          {"no 'lm_head.weight'"});
  // Old transformers saved the rotary frequencies as a buffer; they are not weights.
  EXPECT_NO_THROW(from_hf_llama(
      config, with("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({2}))));

  // A tied model takes a stored head equal to the embedding, and refuses a different one.
  const ModelConfig tied = tiny_config(2, true);
  const auto tied_hf = to_hf_llama(tied, random_params(tied, 7));
  auto stored_head = tied_hf;
  stored_head.emplace_back("lm_head.weight", find(tied_hf, "model.embed_tokens.weight").clone());
  EXPECT_NO_THROW(from_hf_llama(tied, stored_head));
  stored_head.back().second = Tensor::zeros({29, 16});
  expect_checkpoint_error([&] { from_hf_llama(tied, stored_head); },
                          {"'lm_head.weight' that differs", "model.tie_embeddings is true"});
}

TEST(HfLlama, ConfigJsonIsLlamaForCausalLMs) {
  for (bool tied : {false, true}) {
    ModelConfig config = tiny_config(2, tied);
    config.rope_theta = 500000;
    const std::string json = hf_llama_config_json(config);
    Json want = Json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 29, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
        "max_position_embeddings": 16, "hidden_act": "silu", "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0, "rope_scaling": null, "attention_bias": false,
        "mlp_bias": false, "torch_dtype": "float32"})");
    want["tie_word_embeddings"] = tied;
    const Json got = Json::parse(json);
    for (const auto& [key, value] : want.items())
      EXPECT_EQ(got.value(key, Json("missing")), value) << key << " in config.json:\n" << json;
    // Equality holds between 500000 and 500000.0: the floats must be written as floats.
    for (const char* key : {"rms_norm_eps", "rope_theta", "attention_dropout", "initializer_range"})
      EXPECT_TRUE(got[key].is_number_float()) << key << " in config.json:\n" << json;
    EXPECT_NO_THROW(check_partial(config, json, "c.json"));
    config.n_kv_head = 0;  // written as the head count it stands for
    EXPECT_EQ(Json::parse(hf_llama_config_json(config))["num_key_value_heads"], 4);
  }
}

// A model made for a longer context than the run trains at (Llama 3.2's 131072 fine-tuned at
// 2048) keeps that context in its export, so serving it is not cut to the training run's.
TEST(HfLlama, ExportKeepsTheContextTheModelIsMadeFor) {
  ModelConfig config = tiny_config(2, false);
  config.max_context = 131072;
  const std::string json = hf_llama_config_json(config);
  EXPECT_EQ(Json::parse(json)["max_position_embeddings"], 131072);
  EXPECT_NO_THROW(check_partial(config, json, "c.json"));
  expect_checkpoint_error(
      [&] { check_partial(config, R"({"max_position_embeddings": 8192})", "c.json"); },
      {"gives max_position_embeddings 8192, but model.max_context is 131072"});
}

// config.json of a Llama of tiny_config's sizes as transformers 4.x writes it (LlamaConfig's
// every field; rope_theta at the top level), and as 5.x does (rope_parameters).
const char* kTransformers4Config = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "head_dim": 4, "hidden_act": "silu", "hidden_size": 16,
  "initializer_range": 0.02, "intermediate_size": 24, "max_position_embeddings": 2048,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
  "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "float32",
  "transformers_version": "4.46.0", "use_cache": true, "vocab_size": 29
})";
const char* kTransformers5Config = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "dtype": "float32", "eos_token_id": 2, "head_dim": 4, "hidden_act": "silu",
  "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 24,
  "max_position_embeddings": 2048, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
  "tie_word_embeddings": false, "transformers_version": "5.0.0", "use_cache": true,
  "vocab_size": 29
})";

TEST(HfLlama, RopeThetaIsReadWhereEitherTransformersPutsIt) {
  ModelConfig config = tiny_config(2, false);
  config.rope_theta = 500000;
  EXPECT_NO_THROW(check_partial(config, kTransformers4Config, "c.json"));
  EXPECT_NO_THROW(check_partial(config, kTransformers5Config, "c.json"));
  config.rope_theta = 10000;
  expect_checkpoint_error([&] { check_partial(config, kTransformers4Config, "c.json"); },
                          {"'c.json' gives rope_theta 500000", "model.rope_theta is 10000"});
  expect_checkpoint_error(
      [&] { check_partial(config, kTransformers5Config, "c.json"); },
      {"'c.json' gives rope_parameters.rope_theta 500000", "model.rope_theta is 10000"});
  EXPECT_NO_THROW(check_partial(config, R"({"rope_parameters": {"rope_type": "default"},
                                          "rms_norm_eps": 1e-5})",
                                "c.json"));
  EXPECT_NO_THROW(
      check_partial(config, R"({"rope_theta": 10000.0000001, "rms_norm_eps": 1e-5})", "c.json"));
}

// Llama 3's rotary scaling (rope_type "llama3") is read from either transformers' place, each
// field against ours; a scaling we do not compute, or a missing one, is refused.
TEST(HfLlama, RotaryScalingIsLlama3sAndMustMatch) {
  ModelConfig scaled = tiny_config(2, false);
  scaled.rope_scaling_factor = 8;
  const char* llama3_4x =
      R"({"rope_theta": 10000.0, "rms_norm_eps": 1e-5,
          "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0,
          "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}})";
  const char* llama3_5x =
      R"({"rms_norm_eps": 1e-5,
          "rope_parameters": {"rope_theta": 10000.0, "rope_type": "llama3", "factor": 8.0,
          "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192}})";
  EXPECT_NO_THROW(check_partial(scaled, llama3_4x, "c.json"));
  EXPECT_NO_THROW(check_partial(scaled, llama3_5x, "c.json"));
  EXPECT_NO_THROW(check_partial(scaled, hf_llama_config_json(scaled), "c.json"));
  const Json scaling = Json::parse(hf_llama_config_json(scaled))["rope_scaling"];
  EXPECT_EQ(scaling, Json::parse(R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"))
      << hf_llama_config_json(scaled);
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"})
    EXPECT_TRUE(scaling[key].is_number_float()) << key;
  EXPECT_TRUE(scaling["original_max_position_embeddings"].is_number_integer());

  const ModelConfig plain = tiny_config(2, false);
  expect_checkpoint_error(
      [&] { check_partial(plain, llama3_4x, "c.json"); },
      {"'c.json' gives rope_scaling with rope_type 'llama3'", "model.rope_scaling_factor is 0"});
  expect_checkpoint_error(
      [&] { check_partial(scaled, R"({"rope_theta": 10000.0})", "c.json"); },
      {"'c.json' gives no Llama 3 rotary scaling", "model.rope_scaling_factor is 8"});
  ModelConfig other = scaled;
  other.rope_scaling_original_context = 4096;
  expect_checkpoint_error([&] { check_partial(other, llama3_5x, "c.json"); },
                          {"rope_parameters.original_max_position_embeddings 8192",
                           "model.rope_scaling_original_context is 4096"});
  expect_checkpoint_error(
      [&] {
        check_partial(scaled, R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}})",
                      "c.json");
      },
      {"rope_scaling.low_freq_factor is missing"});
  for (const char* json :
       {R"({"rope_scaling": {"type": "linear", "factor": 2.0}})",
        R"({"rope_parameters": {"rope_theta": 10000.0, "rope_type": "yarn", "factor": 4.0}})"})
    expect_checkpoint_error([&] { check_partial(plain, json, "c.json"); },
                            {"'c.json' gives rope_", "'default'", "'llama3'"});
  expect_checkpoint_error(
      [&] { check_partial(plain, R"({"partial_rotary_factor": 0.5})", "c.json"); },
      {"partial_rotary_factor 0.5"});
  EXPECT_NO_THROW(check_partial(plain, R"({"rope_scaling": {"rope_type": "default"},
                                       "rms_norm_eps": 1e-5})",
                                "c.json"));
}

// transformers reads a key config.json leaves out as LlamaConfig's default: a model of another
// rotary base, epsilon or head tying would otherwise import and compute another function.
TEST(HfLlama, AbsentKeysAreTransformersDefaults) {
  ModelConfig config = tiny_config(2, false);
  config.norm_eps = 1e-6;
  EXPECT_NO_THROW(check_partial(config, "{}", "c.json"));
  config.rope_theta = 500000;
  expect_checkpoint_error([&] { check_partial(config, "{}", "c.json"); },
                          {"'c.json' gives no rope_theta, so transformers' default rope_theta "
                           "10000, but model.rope_theta is 500000"});
  config.rope_theta = 10000;
  config.norm_eps = 1e-5;
  expect_checkpoint_error([&] { check_partial(config, "{}", "c.json"); },
                          {"'c.json' gives no rms_norm_eps, so transformers' default 1e-06, but "
                           "model.norm_eps is 1e-05"});
  EXPECT_NO_THROW(check_partial(config, R"({"rms_norm_eps": 1e-5})", "c.json"));
  config.tie_embeddings = true;
  config.norm_eps = 1e-6;
  expect_checkpoint_error([&] { check_partial(config, "{}", "c.json"); },
                          {"'c.json' gives no tie_word_embeddings, so transformers' default "
                           "tie_word_embeddings false, but model.tie_embeddings is true"});
  EXPECT_NO_THROW(check_partial(config, R"({"tie_word_embeddings": true})", "c.json"));
  // Sizes too: a file without them is of LlamaConfig's 4096-wide, 32-layer model.
  config.tie_embeddings = false;
  for (const auto& [key, expected] : std::vector<std::pair<std::string, std::string>>{
           {"hidden_size",
            "gives no hidden_size, so transformers' default hidden_size 4096, "
            "but model.d_model is 16"},
           {"num_hidden_layers", "default num_hidden_layers 32, but model.n_layer is 2"},
           {"num_attention_heads", "default num_attention_heads 32, but model.n_head is 4"},
           {"intermediate_size", "default intermediate_size 11008, but the MLP width"},
           {"vocab_size", "default vocab_size 32000, but model.vocab_size is 29"}}) {
    Json without = Json::parse(hf_llama_config_json(config));
    without.erase(key);
    expect_checkpoint_error([&] { check_hf_llama_config(config, without.dump(), "c.json"); },
                            {expected});
  }
  config.seq_len = 4096;
  Json without_context = Json::parse(hf_llama_config_json(config));
  without_context.erase("max_position_embeddings");
  expect_checkpoint_error(
      [&] { check_hf_llama_config(config, without_context.dump(), "c.json"); },
      {"gives no max_position_embeddings, so transformers' default max_position_embeddings "
       "2048, but model.seq_len is 4096"});
}

TEST(HfLlama, ConfigJsonOfAnotherFamilyIsRefusedBothWays) {
  ModelConfig gpt2;
  gpt2.n_layer = 2;
  gpt2.n_head = 4;
  gpt2.d_model = 16;
  const ModelConfig llama = tiny_config(2, false);
  expect_checkpoint_error([&] { check_partial(llama, hf_gpt2_config_json(gpt2), "c.json"); },
                          {"'c.json' gives model_type 'gpt2'", "model.family is llama"});
  expect_checkpoint_error(
      [&] { check_hf_gpt2_config(gpt2, hf_llama_config_json(llama), "c.json"); },
      {"'c.json' gives model_type 'llama'", "model.family is gpt2"});
  EXPECT_NO_THROW(check_hf_gpt2_config(gpt2, hf_gpt2_config_json(gpt2), "c.json"));
  // Without a model_type, the class names say what the model is.
  ModelConfig llama_defaults = llama;
  llama_defaults.norm_eps = 1e-6;
  expect_checkpoint_error(
      [&] {
        check_partial(llama_defaults, R"({"architectures": ["MistralForCausalLM"]})", "c.json");
      },
      {"'c.json' gives architectures [\"MistralForCausalLM\"], but model.family is llama"});
  expect_checkpoint_error(
      [&] { check_hf_gpt2_config(gpt2, R"({"architectures": ["LlamaForCausalLM"]})", "c.json"); },
      {"a LlamaForCausalLM cannot start a gpt2 model"});
  EXPECT_NO_THROW(
      check_partial(llama_defaults, R"({"architectures": ["LlamaForCausalLM"]})", "c.json"));
  EXPECT_NO_THROW(check_hf_gpt2_config(
      gpt2, testing_support::sized_hf_config(gpt2, R"({"architectures": ["GPT2LMHeadModel"]})"),
      "c.json"));
}

TEST(HfLlama, ConfigJsonSizesAreCheckedNamingOurKey) {
  const ModelConfig config = tiny_config(2, false);
  auto refused = [&](const std::string& json, const std::vector<std::string>& expected) {
    expect_checkpoint_error([&] { check_partial(config, json, "c.json"); }, expected);
  };
  refused(R"({"num_key_value_heads": 4})",
          {"gives num_key_value_heads 4", "model.n_kv_head", "is 2"});
  // transformers reads a missing or null num_key_value_heads as num_attention_heads.
  refused(R"({"num_attention_heads": 4, "num_key_value_heads": null})",
          {"num_attention_heads 4", "model.n_kv_head", "is 2"});
  refused(R"({"num_attention_heads": 8})", {"gives num_attention_heads 8", "model.n_head is 4"});
  refused(R"({"head_dim": 8})", {"gives head_dim 8", "model.d_model / model.n_head) is 4"});
  refused(R"({"hidden_size": 32})", {"gives hidden_size 32", "model.d_model is 16"});
  refused(R"({"num_hidden_layers": 3})", {"model.n_layer is 2"});
  refused(R"({"intermediate_size": 64})", {"gives intermediate_size 64", "model.d_ff"});
  refused(R"({"vocab_size": 32})", {"gives vocab_size 32", "model.vocab_size is 29"});
  refused(R"({"max_position_embeddings": 8})",
          {"max_position_embeddings 8", "model.seq_len is 16"});
  refused(R"({"tie_word_embeddings": true})",
          {"tie_word_embeddings true", "model.tie_embeddings is false"});
  refused(R"({"rms_norm_eps": 1e-06})", {"rms_norm_eps 1e-06", "model.norm_eps is 1e-05"});
  refused(R"({"hidden_act": "gelu"})", {"hidden_act 'gelu'"});
  refused(R"({"attention_bias": true})", {"attention_bias true"});
  refused(R"({"mlp_bias": true})", {"mlp_bias true"});
  refused(R"({"num_hidden_layers": "two"})", {"num_hidden_layers is not an integer"});
  refused("[1, 2]", {"'c.json' is not a JSON object"});
  refused(R"({"hidden_size": )", {"'c.json' is not valid JSON"});
  refused(R"({"hidden_size": 1e400})", {"'c.json' is not valid JSON"});  // past a double
  refused(R"({"hidden_size": "16"})", {"hidden_size is not an integer"});  // quoted
  expect_checkpoint_error(  // raw: a parse for sized_hf_config would keep one of the two
      [&] { check_hf_llama_config(config, R"({"vocab_size": 29, "vocab_size": 29})", "c.json"); },
      {"key 'vocab_size' appears twice"});
  // A float32 round trip of the epsilon, a longer context than ours, keys left out (where
  // transformers' defaults are ours): accepted.
  EXPECT_NO_THROW(check_partial(config, R"({"rms_norm_eps": 9.99999974738e-06})", "c.json"));
  EXPECT_NO_THROW(check_partial(
      config, R"({"max_position_embeddings": 131072, "rms_norm_eps": 1e-5})", "c.json"));
  EXPECT_NO_THROW(check_partial(
      config, R"({"head_dim": null, "rope_scaling": null, "rms_norm_eps": 1e-5})", "c.json"));
  ModelConfig defaults = config;
  defaults.norm_eps = 1e-6;
  EXPECT_NO_THROW(check_partial(defaults, "{}", "c.json"));
}

}  // namespace
}  // namespace ternion
