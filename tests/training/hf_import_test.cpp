// model.init_from: a model exported to Hugging Face GPT-2's format starts a new run exactly
// where it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "framework/safetensors.h"
#include "training/hf_export.h"
#include "training/trainer.h"
#include "training_test_support.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;

TrainConfig small(const ScratchDir& dir) {
  TrainConfig c;
  c.model.seq_len = 16;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.d_model = 32;
  c.parallel.micro_batch_size = 4;
  c.training.global_batch_size = 4;
  c.training.steps = 3;
  c.data.train = dir.file("train.bin");
  c.data.val = dir.file("val.bin");
  return c;
}

// A run's parameters by name.
std::map<std::string, Tensor> parameters_of(Trainer& trained) {
  std::map<std::string, Tensor> params;
  for (const Parameter* p : trained.model().parameters()) params[p->name] = p->value;
  return params;
}

// DIR/hf holding `params` exported as Hugging Face GPT-2 weights (model.safetensors).
std::string write_hf_dir(const ScratchDir& dir, const ModelConfig& model,
                         const std::map<std::string, Tensor>& params) {
  const std::string hf_dir = dir.file("hf");
  std::filesystem::create_directories(hf_dir);
  write_safetensors(hf_dir + "/model.safetensors", to_hf_gpt2(model, params));
  return hf_dir;
}

TEST(HfImport, AnExportedModelStartsANewRunWhereItWas) {
  ScratchDir dir("hf-import");
  prepare_text(builtin_corpus_text(20000), dir.path().string(), {.val_fraction = 0.1});
  TrainConfig c = small(dir);
  Trainer trained(c);
  for (int s = 1; s <= 3; ++s) trained.train_step(s);
  const std::map<std::string, Tensor> params = parameters_of(trained);
  const std::string hf_dir = write_hf_dir(dir, c.model, params);

  TrainConfig resumed = c;
  resumed.model.init_from = hf_dir;
  Trainer started(resumed);
  for (const Parameter* p : started.model().parameters())
    EXPECT_EQ(p->value.to_vector(), params.at(p->name).to_vector()) << p->name;
  EXPECT_EQ(started.evaluate(), trained.evaluate());
}

// OpenAI's released GPT-2 files (GPT2Model's) name the weights without "transformer.", and
// older ones carry each block's causal-mask buffers (h.N.attn.bias, a [1, 1, n_ctx, n_ctx]
// lower triangle, and h.N.attn.masked_bias, a scalar), which are not weights: ignored.
TEST(HfImport, WeightsNamedWithoutTheTransformerPrefixLoadToo) {
  ScratchDir dir("hf-import-unprefixed");
  prepare_text(builtin_corpus_text(20000), dir.path().string(), {.val_fraction = 0.1});
  TrainConfig c = small(dir);
  Trainer trained(c);
  trained.train_step(1);
  const std::map<std::string, Tensor> params = parameters_of(trained);
  std::vector<std::pair<std::string, Tensor>> unprefixed;
  const std::string prefix = "transformer.";
  for (auto& [name, tensor] : to_hf_gpt2(c.model, params)) {
    ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
    unprefixed.emplace_back(name.substr(prefix.size()), tensor);
  }
  const std::int64_t n = c.model.seq_len;
  std::vector<float> lower(static_cast<std::size_t>(n * n), 0.0f);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) lower[static_cast<std::size_t>(i * n + j)] = 1.0f;
  for (std::int64_t b = 0; b < c.model.n_layer; ++b) {
    const std::string block = "h." + std::to_string(b) + ".attn.";
    unprefixed.emplace_back(block + "bias", Tensor::from_vector(lower, {1, 1, n, n}));
    unprefixed.emplace_back(block + "masked_bias", Tensor::from_vector({-1e4f}, {}));
  }
  const std::string hf_dir = dir.file("hf");
  std::filesystem::create_directories(hf_dir);
  write_safetensors(hf_dir + "/model.safetensors", unprefixed);

  TrainConfig resumed = c;
  resumed.model.init_from = hf_dir;
  Trainer started(resumed);
  for (const Parameter* p : started.model().parameters())
    EXPECT_EQ(p->value.to_vector(), params.at(p->name).to_vector()) << p->name;
}

TEST(HfImport, MismatchedWeightsAreRefusedNamingTheTensor) {
  ScratchDir dir("hf-import-bad");
  prepare_text(builtin_corpus_text(20000), dir.path().string(), {.val_fraction = 0.1});
  TrainConfig c = small(dir);
  Trainer trained(c);
  const std::map<std::string, Tensor> params = parameters_of(trained);
  const std::string hf_dir = write_hf_dir(dir, c.model, params);
  TrainConfig wider = c;
  wider.model.d_model = 64;
  wider.model.init_from = hf_dir;
  try {
    Trainer t(wider);
    FAIL() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("transformer.wte.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(hf_dir), std::string::npos) << e.what();
  }
  TrainConfig missing = c;
  missing.model.init_from = dir.file("nowhere");
  try {
    Trainer t(missing);
    FAIL() << "no error";
  } catch (const CheckpointError& e) {  // the key named, not only the file
    EXPECT_NE(std::string(e.what()).find("model.init_from '" + dir.file("nowhere") + "'"),
              std::string::npos) << e.what();
  }
}

// The head count is invisible in the weights' shapes: config.json is what tells a model of 4
// heads from one of 2, so a run of another head count must be refused, not started.
TEST(HfImport, ConfigJsonOfAnotherHeadCountIsRefused) {
  ScratchDir dir("hf-import-heads");
  prepare_text(builtin_corpus_text(20000), dir.path().string(), {.val_fraction = 0.1});
  TrainConfig c = small(dir);
  Trainer trained(c);
  const std::map<std::string, Tensor> params = parameters_of(trained);
  const std::string hf_dir = write_hf_dir(dir, c.model, params);
  std::ofstream(hf_dir + "/config.json") << hf_gpt2_config_json(c.model);

  TrainConfig same = c;
  same.model.init_from = hf_dir;
  EXPECT_NO_THROW(Trainer t(same));

  TrainConfig one_head = same;
  one_head.model.n_head = 1;
  try {
    Trainer t(one_head);
    FAIL() << "a model of 1 head started from weights of 2";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("n_head 2"), std::string::npos) << what;
    EXPECT_NE(what.find("model.n_head is 1"), std::string::npos) << what;
    EXPECT_NE(what.find("config.json"), std::string::npos) << what;
  }

  std::ofstream(hf_dir + "/config.json") << "{\"n_head\": ";
  EXPECT_THROW(Trainer t(same), CheckpointError);
}

// transformers reads a size config.json leaves out as GPT2Config's default, and its aliases
// (attribute_map: num_attention_heads for n_head, ...) as the size itself: a model read any
// other way would load as another model, or compute another function with the same weights.
TEST(HfImport, ConfigJsonSizesAreReadAsTransformersReadsThem) {
  ModelConfig m;
  m.n_layer = 2;
  m.n_head = 2;
  m.d_model = 32;
  m.seq_len = 16;
  m.vocab_size = 64;
  auto sized = [&](const std::string& json) { return testing_support::sized_hf_config(m, json); };
  EXPECT_NO_THROW(check_hf_gpt2_config(m, hf_gpt2_config_json(m), "c.json"));
  EXPECT_NO_THROW(check_hf_gpt2_config(m, sized("{\"n_inner\": null}"), "c.json"));
  EXPECT_NO_THROW(check_hf_gpt2_config(m, sized("{}"), "c.json"));
  EXPECT_THROW(check_hf_gpt2_config(m, sized("{\"n_inner\": 64}"), "c.json"), CheckpointError);
  EXPECT_THROW(check_hf_gpt2_config(m, "{\"n_layer\": \"two\"}", "c.json"), CheckpointError);
  EXPECT_THROW(check_hf_gpt2_config(m, sized("{\"activation_function\": \"gelu\"}"), "c.json"),
               CheckpointError);
  EXPECT_THROW(check_hf_gpt2_config(m, "[1, 2]", "c.json"), CheckpointError);
  auto refused = [&](const std::string& json, const std::string& expected) {
    try {
      check_hf_gpt2_config(m, json, "c.json");
      ADD_FAILURE() << "accepted " << json;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  Json without_heads = Json::parse(hf_gpt2_config_json(m));
  without_heads.erase("n_head");
  refused(without_heads.dump(),
          "'c.json' gives no n_head, so transformers' default n_head 12, but model.n_head is 2");
  Json without_positions = Json::parse(hf_gpt2_config_json(m));
  without_positions.erase("n_positions");
  refused(without_positions.dump(), "default n_positions 1024, but model.seq_len is 16");
  Json aliased = without_heads;
  aliased["num_attention_heads"] = 12;
  refused(aliased.dump(), "'c.json' gives num_attention_heads 12, but model.n_head is 2");
  aliased["num_attention_heads"] = 2;
  EXPECT_NO_THROW(check_hf_gpt2_config(m, aliased.dump(), "c.json"));
  aliased["n_head"] = 4;
  refused(aliased.dump(),
          "'c.json' gives n_head 4 and num_attention_heads 2, which "
          "transformers reads as one setting");
}

// transformers' GPT-2 makes some of its math configurable; a model that computes other math
// than ours is refused, naming the key, rather than imported as a different model.
TEST(HfImport, ConfigJsonOfOtherMathIsRefusedNamingTheKey) {
  const ModelConfig m;
  for (const char* ours : {R"({"tie_word_embeddings": true})", R"({"scale_attn_weights": true})",
                           R"({"scale_attn_by_inverse_layer_idx": false})",
                           R"({"layer_norm_epsilon": 1e-05})",
                           R"({"layer_norm_epsilon": 9.999999747378752e-06})"})
    EXPECT_NO_THROW(check_hf_gpt2_config(m, testing_support::sized_hf_config(m, ours), "c.json"))
        << ours;
  for (const auto& [theirs, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"tie_word_embeddings": false})", "tie_word_embeddings false"},
           {R"({"scale_attn_weights": false})", "scale_attn_weights false"},
           {R"({"scale_attn_by_inverse_layer_idx": true})", "scale_attn_by_inverse_layer_idx true"},
           {R"({"scale_attn_by_inverse_layer_idx": 1})", "scale_attn_by_inverse_layer_idx is not"},
           {R"({"layer_norm_epsilon": 0.1})", "layer_norm_epsilon 0.1"},
           {R"({"layer_norm_epsilon": "1e-5"})", "layer_norm_epsilon is not a number"}}) {
    try {
      check_hf_gpt2_config(m, testing_support::sized_hf_config(m, theirs), "c.json");
      ADD_FAILURE() << "accepted " << theirs;
    } catch (const CheckpointError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'c.json'"), std::string::npos) << what;
      EXPECT_NE(what.find(key), std::string::npos) << what;
    }
  }
}

// A stored lm_head.weight equal to wte is GPT-2's tied head written out; one that differs is
// an untied model's, which this one cannot compute.
TEST(HfImport, AnUntiedHeadIsRefusedAndATiedOneLoads) {
  ScratchDir dir("hf-import-head");
  prepare_text(builtin_corpus_text(20000), dir.path().string(), {.val_fraction = 0.1});
  TrainConfig c = small(dir);
  Trainer trained(c);
  const std::map<std::string, Tensor> params = parameters_of(trained);
  std::vector<std::pair<std::string, Tensor>> hf = to_hf_gpt2(c.model, params);
  Tensor head;
  for (const auto& [name, tensor] : hf)
    if (name == "transformer.wte.weight") head = tensor.clone();
  ASSERT_TRUE(head.defined());
  hf.emplace_back("lm_head.weight", head);
  const std::map<std::string, Tensor> ours = from_hf_gpt2(c.model, hf);
  EXPECT_EQ(ours.at("wte").to_vector(), params.at("wte").to_vector());

  head.data<float>()[5] += 1.0f;
  try {
    from_hf_gpt2(c.model, hf);
    FAIL() << "an untied head was imported";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'lm_head.weight' that differs from"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ternion
