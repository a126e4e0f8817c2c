// model.family: the Llama keys, each refused with the key named where it is wrong, and a GPT-2
// config that sets a Llama key refused rather than silently ignored.
#include <gtest/gtest.h>

#include "training/train_config.h"

namespace ternion {
namespace {

constexpr const char* kLlama =
    "model:\n"
    "  family: llama\n"
    "  seq_len: 16\n"
    "  n_layer: 2\n"
    "  n_head: 4\n"
    "  n_kv_head: 2\n"
    "  d_model: 32\n"
    "parallel:\n"
    "  micro_batch_size: 2\n"
    "training:\n"
    "  steps: 3\n"
    "  global_batch_size: 4\n"
    "data:\n"
    "  train: train.bin\n";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides,
                     std::int64_t world_size = 1) {
  try {
    TrainConfig::parse(yaml, "run.yaml", overrides, world_size);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelFamilyConfig, LlamaConfigReads) {
  const TrainConfig c = TrainConfig::parse(kLlama, "run.yaml", {});
  EXPECT_EQ(c.model.family, "llama");
  EXPECT_EQ(c.model.kv_heads(), 2);
  EXPECT_FALSE(c.model.tie_embeddings);
  EXPECT_EQ(error_of(kLlama, {"model.n_kv_head=0"}), "");  // 0: as many as query heads
}

TEST(ModelFamilyConfig, BadLlamaValuesNameTheirKey) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"model.n_kv_head=3", "model.n_kv_head", "must divide model.n_head (4)"},
      {"model.n_kv_head=-1", "model.n_kv_head", "must divide model.n_head"},
      // 32 / 16 = 2 is even; 48 / 16 = 3 is not.
      {"model.d_model=48", "model.n_head", "the head size must be even"},
      {"model.rope_theta=0", "model.rope_theta", "must be above 1"},
      {"model.norm_eps=0", "model.norm_eps", "must be in (0, 1)"},
      // Positive as a double, 0 as the float the norms run in.
      {"model.norm_eps=1e-50", "model.norm_eps", "and above 0 as a float"},
      {"model.rope_scaling_factor=0.5", "model.rope_scaling_factor",
       "must be 0 (no scaling) or at least 1"},
      {"model.rope_scaling_low_freq_factor=0", "model.rope_scaling_low_freq_factor",
       "must be positive"},
      {"model.rope_scaling_high_freq_factor=1", "model.rope_scaling_high_freq_factor",
       "must be above model.rope_scaling_low_freq_factor"},
      {"model.rope_scaling_original_context=0", "model.rope_scaling_original_context",
       "must be positive"},
      {"model.max_context=8", "model.max_context",
       "must be 0 (= model.seq_len) or at least model.seq_len (16), got 8"},
      {"model.max_context=-1", "model.max_context", "got -1"},
      {"model.family=mamba", "model.family", "unknown family 'mamba' (known: gpt2, llama)"},
  };
  for (const auto& [set, key, why] : cases) {
    std::vector<std::string> overrides{set};
    if (set == "model.d_model=48") overrides.push_back("model.n_head=16");
    if (set == "model.d_model=48") overrides.push_back("model.n_kv_head=16");
    if (set.rfind("model.rope_scaling_", 0) == 0 && set.find("factor=0.5") == std::string::npos)
      overrides.push_back("model.rope_scaling_factor=8");  // the other keys count with scaling
    const std::string msg = error_of(kLlama, overrides);
    EXPECT_NE(msg.find(key), std::string::npos) << set << ": " << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << set << ": " << msg;
  }
}

TEST(ModelFamilyConfig, KeyValueHeadsMustSplitOverTheTensorRanks) {
  const std::string msg = error_of(kLlama, {"parallel.tensor=4"}, 4);
  EXPECT_NE(msg.find("model.n_kv_head"), std::string::npos) << msg;
  EXPECT_NE(msg.find("n_kv_head (2) is not a multiple of parallel.tensor (4)"), std::string::npos)
      << msg;
  EXPECT_EQ(error_of(kLlama, {"parallel.tensor=2"}, 2), "");
}

// A checkpoint keeps its config with the keys its family does not use commented out, so it
// loads again.
TEST(ModelFamilyConfig, SavedConfigsKeepTheirFamilysKeysOnly) {
  std::string gpt2 = kLlama;
  gpt2.replace(gpt2.find("  family: llama\n"), 16, "");
  gpt2.replace(gpt2.find("  n_kv_head: 2\n"), 15, "");
  const std::string saved_gpt2 = config_yaml(TrainConfig::parse(gpt2, "run.yaml", {}));
  EXPECT_EQ(saved_gpt2.find("\n  n_kv_head"), std::string::npos) << saved_gpt2;
  EXPECT_NE(saved_gpt2.find("\n  # n_kv_head: 0"), std::string::npos) << saved_gpt2;
  EXPECT_EQ(error_of(saved_gpt2, {}), "");
  const std::string saved_llama = config_yaml(TrainConfig::parse(kLlama, "run.yaml", {}));
  EXPECT_NE(saved_llama.find("n_kv_head: 2"), std::string::npos) << saved_llama;
  EXPECT_EQ(TrainConfig::parse(saved_llama, "saved.yaml", {}).model.kv_heads(), 2);
}

// Llama 3.1's scaling block copied without its factor would train unscaled rotary positions
// without a word: the keys the factor switches on are refused without it, and printed
// commented out.
TEST(ModelFamilyConfig, RotaryScalingKeysNeedTheFactor) {
  for (const std::string key : {"rope_scaling_low_freq_factor=2",
                                "rope_scaling_high_freq_factor=8",
                                "rope_scaling_original_context=4096"}) {
    const std::string msg = error_of(kLlama, {"model." + key});
    EXPECT_NE(msg.find("model." + key.substr(0, key.find('='))), std::string::npos) << msg;
    EXPECT_NE(msg.find("is read only with model.rope_scaling_factor > 0"), std::string::npos)
        << msg;
    EXPECT_EQ(error_of(kLlama, {"model." + key, "model.rope_scaling_factor=8"}), "");
  }
  const std::string plain = config_yaml(TrainConfig::parse(kLlama, "run.yaml", {}));
  EXPECT_NE(plain.find("\n  # rope_scaling_original_context: 8192"), std::string::npos) << plain;
  EXPECT_EQ(error_of(plain, {}), "");
  const std::string scaled =
      config_yaml(TrainConfig::parse(kLlama, "run.yaml", {"model.rope_scaling_factor=8"}));
  EXPECT_NE(scaled.find("\n  rope_scaling_original_context: 8192"), std::string::npos) << scaled;
}

TEST(ModelFamilyConfig, Gpt2RefusesLlamaKeys) {
  std::string gpt2 = kLlama;
  gpt2.replace(gpt2.find("  family: llama\n"), 16, "");
  gpt2.replace(gpt2.find("  n_kv_head: 2\n"), 15, "");
  EXPECT_EQ(error_of(gpt2, {}), "");
  for (const std::string key : {"n_kv_head=2", "rope_theta=500000", "rope_scaling_factor=8",
                                "rope_scaling_original_context=4096", "norm_eps=1e-6",
                                "tie_embeddings=true", "max_context=1024"}) {
    const std::string msg = error_of(gpt2, {"model." + key});
    EXPECT_NE(msg.find("model." + key.substr(0, key.find('='))), std::string::npos) << msg;
    EXPECT_NE(msg.find("is a llama key"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ternion
