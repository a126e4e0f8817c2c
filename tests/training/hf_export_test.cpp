// The Hugging Face GPT-2 export: every name and shape, c_attn giving the same q, k, v as our
// head-grouped QKV, and the strongest check, a naive GPT-2 forward written here in HF's layout
// (Conv1D, q/k/v split by columns, gelu_new, causal attention) over the exported tensors, read
// back from a safetensors file, reproducing GptModel::logits.
#include "training/hf_export.h"

#include <gtest/gtest.h>

#include <cmath>

#include "framework/safetensors.h"
#include "framework/strict_json.h"
#include "layers/gpt_model.h"
#include "test_util.h"
#include "training/hf_interop.h"
#include "training/training_test_support.h"

namespace ternion {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.vocab_pad_multiple = 8;  // 32 rows, 3 of them padding
  c.seq_len = 7;
  c.n_layer = 2;
  c.n_head = 3;
  c.d_model = 12;
  c.d_ff = 20;
  c.init_std = 0.2;  // large enough that every layer visibly moves the logits
  return c;
}

std::map<std::string, Tensor> parameters_by_name(const GptModel& model) {
  std::map<std::string, Tensor> out;
  for (const Parameter* p : model.parameters()) out[p->name] = p->value;
  return out;
}

// Row-major [rows, cols] matrix product in double: a [n, k] times b [k, m].
std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b,
                           std::int64_t n, std::int64_t k, std::int64_t m) {
  std::vector<double> out(static_cast<std::size_t>(n * m), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t p = 0; p < k; ++p)
      for (std::int64_t j = 0; j < m; ++j)
        out[static_cast<std::size_t>(i * m + j)] +=
            a[static_cast<std::size_t>(i * k + p)] * b[static_cast<std::size_t>(p * m + j)];
  return out;
}

std::vector<double> values(const Tensor& t) { return test::convert<double>(t.to_vector()); }

TEST(HfExport, NamesAndShapesAreGpt2s) {
  for (std::int64_t d_ff : {20, 0}) {
    ModelConfig config = tiny_config();
    config.d_ff = d_ff;
    GptModel model(config);
    model.initialize(1);
    const auto hf = to_hf_gpt2(config, parameters_by_name(model));
    const std::int64_t c = 12, f = config.ff_width();
    std::vector<std::pair<std::string, Shape>> want = {{"transformer.wte.weight", {29, c}},
                                                       {"transformer.wpe.weight", {7, c}}};
    for (int i = 0; i < 2; ++i) {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      for (const auto& [name, shape] :
           std::vector<std::pair<std::string, Shape>>{{"ln_1.weight", {c}},
                                                      {"ln_1.bias", {c}},
                                                      {"attn.c_attn.weight", {c, 3 * c}},
                                                      {"attn.c_attn.bias", {3 * c}},
                                                      {"attn.c_proj.weight", {c, c}},
                                                      {"attn.c_proj.bias", {c}},
                                                      {"ln_2.weight", {c}},
                                                      {"ln_2.bias", {c}},
                                                      {"mlp.c_fc.weight", {c, f}},
                                                      {"mlp.c_fc.bias", {f}},
                                                      {"mlp.c_proj.weight", {f, c}},
                                                      {"mlp.c_proj.bias", {c}}})
        want.emplace_back(h + name, shape);
    }
    want.emplace_back("transformer.ln_f.weight", Shape{c});
    want.emplace_back("transformer.ln_f.bias", Shape{c});
    ASSERT_EQ(hf.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(hf[i].first, want[i].first);
      EXPECT_EQ(hf[i].second.shape(), want[i].second) << want[i].first;
      EXPECT_TRUE(hf[i].second.is_contiguous()) << want[i].first;
    }
    // The embedding keeps the real rows, in order.
    const auto wte = parameters_by_name(model).at("wte");
    test::expect_bitwise_equal("wte rows", hf[0].second.to_vector(),
                               wte.slice(0, 0, 29).to_vector());

    const std::string text = hf_gpt2_config_json(config);
    const Json json = Json::parse(text);
    Json config_want = Json::parse(R"({"model_type": "gpt2", "vocab_size": 29, "n_positions": 7,
        "n_ctx": 7, "n_embd": 12, "n_layer": 2, "n_head": 3, "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true,
        "architectures": ["GPT2LMHeadModel"]})");
    config_want["n_inner"] = d_ff > 0 ? Json(20) : Json(nullptr);
    for (const auto& [key, value] : config_want.items())
      EXPECT_EQ(json.value(key, Json("missing")), value) << key << " in config.json:\n" << text;
    for (const char* key : {"layer_norm_epsilon", "embd_pdrop", "attn_pdrop", "initializer_range"})
      EXPECT_TRUE(json[key].is_number_float()) << key << " in config.json:\n" << text;
  }
}

// The exported config names the run's own begin and end of text, or null, never transformers'
// defaults (GPT-2's 50256, Llama's 1 and 2), ids of another vocabulary that generate would stop
// at; each family's keys are kept as they are.
TEST(HfExport, ConfigNamesTheTokenizersEndOfText) {
  ModelConfig gpt2 = tiny_config();
  gpt2.vocab_size = 300;
  ModelConfig llama = gpt2;
  llama.family = "llama";
  const Tokenizer trained(BpeTokenizer::train("the cat sat. ", 262, {"<|endoftext|>"}));
  const Tokenizer llama_kind(BpeTokenizer::train(
      "the cat sat. ", 264, {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"}));
  for (const ModelConfig& config : {gpt2, llama}) {
    const Json family = Json::parse(hf_mapping(config).config_json(config));
    const Json bytes = Json::parse(hf_config_json(config, Tokenizer::bytes()));
    EXPECT_TRUE(bytes.at("bos_token_id").is_null()) << config.family;
    EXPECT_TRUE(bytes.at("eos_token_id").is_null()) << config.family;
    const Json bpe = Json::parse(hf_config_json(config, trained));
    EXPECT_EQ(bpe.at("bos_token_id"), trained.end_of_text_id()) << config.family;
    EXPECT_EQ(bpe.at("eos_token_id"), trained.end_of_text_id()) << config.family;
    const Json llama_ids = Json::parse(hf_config_json(config, llama_kind));
    EXPECT_EQ(llama_ids.at("bos_token_id"), llama_kind.begin_of_text_id());
    EXPECT_EQ(llama_ids.at("eos_token_id"), llama_kind.end_of_text_id());
    for (const auto& [key, value] : family.items()) EXPECT_EQ(bpe.at(key), value) << key;
    EXPECT_EQ(bpe.size(), family.size() + 2);
  }
  // The same tokens by their text, for transformers' tokenizer, with the model's context.
  const Json gpt2_names = Json::parse(hf_tokenizer_config_json(gpt2, trained));
  EXPECT_EQ(gpt2_names.at("bos_token"), "<|endoftext|>");
  EXPECT_EQ(gpt2_names.at("eos_token"), "<|endoftext|>");
  EXPECT_EQ(gpt2_names.at("model_max_length"), gpt2.seq_len);
  EXPECT_EQ(gpt2_names.at("tokenizer_class"), "PreTrainedTokenizerFast");
  llama.max_context = 4 * llama.seq_len;
  const Json llama_names = Json::parse(hf_tokenizer_config_json(llama, llama_kind));
  EXPECT_EQ(llama_names.at("bos_token"), "<|begin_of_text|>");
  EXPECT_EQ(llama_names.at("eos_token"), "<|end_of_text|>");
  EXPECT_EQ(llama_names.at("model_max_length"), 4 * llama.seq_len);
  const Tokenizer unmarked(BpeTokenizer::train("the cat sat. ", 262, {"<|eot_id|>"}));
  const Json none = Json::parse(hf_tokenizer_config_json(gpt2, unmarked));
  EXPECT_TRUE(none.at("bos_token").is_null());
  EXPECT_TRUE(none.at("eos_token").is_null());
}

TEST(HfExport, CAttnGivesTheSameQueriesKeysAndValues) {
  const ModelConfig config = tiny_config();
  GptModel model(config);
  model.initialize(2);
  auto params = parameters_by_name(model);
  // Biases start at zero; make them random so their regrouping is checked too.
  params["h.1.attn.qkv.bias"] = Tensor::from_vector(test::random_floats(36, 9), {36});
  const auto hf = to_hf_gpt2(config, params);
  auto hf_tensor = [&](const std::string& name) {
    for (const auto& [n, t] : hf) if (n == name) return t;
    throw std::runtime_error("no " + name);
  };
  const std::int64_t n = 5, c = 12, hs = 4;
  const std::vector<double> x = test::convert<double>(test::random_floats(n * c, 3));
  // Ours: y = x W^T + b with W [3C, C], head h's q, k, v at rows (3h + part) * hs.
  const auto w = values(params.at("h.1.attn.qkv.weight"));
  const auto b = values(params.at("h.1.attn.qkv.bias"));
  std::vector<double> w_t(static_cast<std::size_t>(3 * c * c));
  for (std::int64_t r = 0; r < 3 * c; ++r)
    for (std::int64_t k = 0; k < c; ++k)
      w_t[static_cast<std::size_t>(k * 3 * c + r)] = w[static_cast<std::size_t>(r * c + k)];
  const auto ours = matmul(x, w_t, n, c, 3 * c);
  // HF: y = x W + b with W [C, 3C], columns [all q | all k | all v].
  const auto theirs =
      matmul(x, values(hf_tensor("transformer.h.1.attn.c_attn.weight")), n, c, 3 * c);
  const auto hf_b = values(hf_tensor("transformer.h.1.attn.c_attn.bias"));
  const char* part_names[] = {"q", "k", "v"};
  for (std::int64_t h = 0; h < 3; ++h)
    for (std::int64_t part = 0; part < 3; ++part) {
      std::vector<double> got, want;
      for (std::int64_t row = 0; row < n; ++row)
        for (std::int64_t i = 0; i < hs; ++i) {
          const std::int64_t our_col = (3 * h + part) * hs + i, hf_col = part * c + h * hs + i;
          want.push_back(ours[static_cast<std::size_t>(row * 3 * c + our_col)] +
                         b[static_cast<std::size_t>(our_col)]);
          got.push_back(theirs[static_cast<std::size_t>(row * 3 * c + hf_col)] +
                        hf_b[static_cast<std::size_t>(hf_col)]);
        }
      test::expect_close(std::string(part_names[part]) + " of head " + std::to_string(h), got, want,
                         1e-12, 1e-12);
    }
}

// GPT-2 as transformers' modeling_gpt2.py computes it, in double.
class NaiveHfGpt2 {
 public:
  NaiveHfGpt2(const ModelConfig& config, const SafetensorsFile& file)
      : config_(config), file_(file) {}

  // Logits [B * T, vocab] of tokens [B, T].
  std::vector<double> logits(const std::vector<std::int32_t>& tokens, std::int64_t batch,
                             std::int64_t seq) const {
    const std::int64_t c = config_.d_model, f = config_.ff_width(), vocab = config_.vocab_size;
    const auto wte = get("transformer.wte.weight"), wpe = get("transformer.wpe.weight");
    std::vector<double> logits_out;
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<double> x(static_cast<std::size_t>(seq * c));
      for (std::int64_t t = 0; t < seq; ++t)
        for (std::int64_t j = 0; j < c; ++j)
          x[idx(t, j, c)] =
              wte[idx(tokens[static_cast<std::size_t>(b * seq + t)], j, c)] + wpe[idx(t, j, c)];
      for (std::int64_t l = 0; l < config_.n_layer; ++l) {
        const std::string p = "transformer.h." + std::to_string(l) + ".";
        const auto qkv = conv1d(layer_norm(x, seq, p + "ln_1"), seq, c, 3 * c, p + "attn.c_attn");
        const auto attn = conv1d(attention(qkv, seq), seq, c, c, p + "attn.c_proj");
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += attn[i];
        auto hidden = conv1d(layer_norm(x, seq, p + "ln_2"), seq, c, f, p + "mlp.c_fc");
        for (double& v : hidden) v = gelu_new(v);
        const auto mlp = conv1d(hidden, seq, f, c, p + "mlp.c_proj");
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += mlp[i];
      }
      const auto final_x = layer_norm(x, seq, "transformer.ln_f");
      for (std::int64_t t = 0; t < seq; ++t)  // the tied head: logits = x wte^T
        for (std::int64_t v = 0; v < vocab; ++v) {
          double sum = 0;
          for (std::int64_t j = 0; j < c; ++j) sum += final_x[idx(t, j, c)] * wte[idx(v, j, c)];
          logits_out.push_back(sum);
        }
    }
    return logits_out;
  }

 private:
  static std::size_t idx(std::int64_t row, std::int64_t col, std::int64_t cols) {
    return static_cast<std::size_t>(row * cols + col);
  }
  std::vector<double> get(const std::string& name) const { return values(file_.read(name)); }

  std::vector<double> layer_norm(const std::vector<double>& x, std::int64_t rows,
                                 const std::string& name) const {
    const std::int64_t c = config_.d_model;
    const auto w = get(name + ".weight"), b = get(name + ".bias");
    std::vector<double> out(x.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (std::int64_t j = 0; j < c; ++j) mean += x[idx(r, j, c)] / static_cast<double>(c);
      for (std::int64_t j = 0; j < c; ++j)
        var += std::pow(x[idx(r, j, c)] - mean, 2) / static_cast<double>(c);
      for (std::int64_t j = 0; j < c; ++j)
        out[idx(r, j, c)] =
            (x[idx(r, j, c)] - mean) / std::sqrt(var + 1e-5) * w[static_cast<std::size_t>(j)] +
            b[static_cast<std::size_t>(j)];
    }
    return out;
  }

  // HF's Conv1D: y = x W + b, W [in, out].
  std::vector<double> conv1d(const std::vector<double>& x, std::int64_t rows, std::int64_t in,
                             std::int64_t out, const std::string& name) const {
    auto y = matmul(x, get(name + ".weight"), rows, in, out);
    const auto b = get(name + ".bias");
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < out; ++j) y[idx(r, j, out)] += b[static_cast<std::size_t>(j)];
    return y;
  }

  // qkv [T, 3C] split by columns into q | k | v, each head h at columns h*hs of its part.
  std::vector<double> attention(const std::vector<double>& qkv, std::int64_t seq) const {
    const std::int64_t c = config_.d_model, hs = config_.head_size();
    std::vector<double> out(static_cast<std::size_t>(seq * c), 0.0);
    for (std::int64_t h = 0; h < config_.n_head; ++h)
      for (std::int64_t i = 0; i < seq; ++i) {
        std::vector<double> scores(static_cast<std::size_t>(i + 1));
        double max_score = -1e300;
        for (std::int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (std::int64_t d = 0; d < hs; ++d)
            s += qkv[idx(i, h * hs + d, 3 * c)] * qkv[idx(j, c + h * hs + d, 3 * c)];
          scores[static_cast<std::size_t>(j)] = s / std::sqrt(static_cast<double>(hs));
          max_score = std::max(max_score, scores[static_cast<std::size_t>(j)]);
        }
        double total = 0;
        for (double& s : scores) total += (s = std::exp(s - max_score));
        for (std::int64_t j = 0; j <= i; ++j)
          for (std::int64_t d = 0; d < hs; ++d)
            out[idx(i, h * hs + d, c)] += scores[static_cast<std::size_t>(j)] / total *
                                          qkv[idx(j, 2 * c + h * hs + d, 3 * c)];
      }
    return out;
  }

  static double gelu_new(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }

  const ModelConfig& config_;
  const SafetensorsFile& file_;
};

TEST(HfExport, NaiveHfForwardOverTheExportedFileReproducesOurLogits) {
  const ModelConfig config = tiny_config();
  GptModel model(config);
  model.initialize(4);
  auto params = parameters_by_name(model);
  // Biases and LayerNorm parameters start at 0 and 1; randomise them all so a swapped or
  // misplaced bias or norm changes the logits.
  std::uint64_t seed = 100;
  for (const Parameter* p : model.parameters())
    if (Tensor value = p->value; value.dim() == 1)  // shares the parameter's storage
      value.copy_from(Tensor::from_vector(
          test::random_floats(static_cast<std::size_t>(p->value.numel()), ++seed, -0.5f, 0.5f),
          p->value.shape()));

  testing_support::ScratchDir dir("hf-export");
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, to_hf_gpt2(config, params), {{"format", "pt"}});
  const SafetensorsFile file = SafetensorsFile::open(path);

  const std::int64_t batch = 2, seq = 7;
  const auto token_ids = test::random_ints(static_cast<std::size_t>(batch * seq), 5, 0, 29);
  MicroBatchInfo info;
  info.training = false;
  ActivationContext ctx(info);
  const Tensor logits = model.logits(test::i32_tensor(token_ids, {batch, seq}), ctx);
  ASSERT_EQ(logits.shape(), (Shape{batch, seq, config.padded_vocab_size()}));
  std::vector<float> ours;
  const std::vector<float> all = logits.to_vector();
  for (std::int64_t row = 0; row < batch * seq; ++row)
    for (std::int64_t v = 0; v < config.vocab_size; ++v)
      ours.push_back(all[static_cast<std::size_t>(row * config.padded_vocab_size() + v)]);

  const auto theirs = NaiveHfGpt2(config, file).logits(token_ids, batch, seq);
  test::expect_close("logits, ours vs naive HF GPT-2", ours, theirs, 1e-4, 1e-4);
}

TEST(HfExport, RefusesWhatItCannotMap) {
  const ModelConfig config = tiny_config();
  GptModel model(config);
  model.initialize(1);
  auto params = parameters_by_name(model);
  auto expect_refusal = [&](const std::map<std::string, Tensor>& p, const ModelConfig& cfg,
                            const std::string& expected) {
    try {
      to_hf_gpt2(cfg, p);
      ADD_FAILURE() << "accepted, expected '" << expected << "'";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  auto missing = params;
  missing.erase("h.1.mlp.fc.bias");
  expect_refusal(missing, config, "'h.1.mlp.fc.bias' is missing");
  auto wrong_shape = params;
  wrong_shape["wpe"] = Tensor::zeros({8, 12});
  expect_refusal(wrong_shape, config, "'wpe' is [8, 12], expected [7, 12]");
  auto extra = params;
  extra["h.0.attn.rotary"] = Tensor::zeros({4});
  expect_refusal(extra, config, "'h.0.attn.rotary' has no GPT-2 counterpart");
  ModelConfig custom = config;
  custom.block = "parallel_residual";
  expect_refusal(params, custom, "parallel_residual");
}

}  // namespace
}  // namespace ternion
