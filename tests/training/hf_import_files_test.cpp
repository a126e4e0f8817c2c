// model.init_from reads Hugging Face directories as released models come: weights in bf16 or
// f16 (widened to f32 exactly) and split over several files named by
// model.safetensors.index.json; a damaged index is refused naming the file and the tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "framework/bfloat16.h"
#include "framework/float16.h"
#include "framework/safetensors.h"
#include "layers/gpt_model.h"
#include "test_util.h"
#include "training/hf_export.h"
#include "training/hf_import.h"
#include "training_test_support.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;

ModelConfig small_model() {
  ModelConfig c;
  c.seq_len = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.vocab_size = 40;
  c.vocab_pad_multiple = 8;
  return c;
}

// Random whole parameters by name, quantised to multiples of 1/64 in [-1, 1], which bf16 and
// f16 hold exactly; the vocabulary's padding rows zero.
std::map<std::string, Tensor> exact_params(const ModelConfig& c) {
  GptModel model(c);
  std::map<std::string, Tensor> params;
  std::uint64_t seed = 7;
  for (const Parameter* p : model.parameters()) {
    std::vector<float> v = test::random_floats(static_cast<std::size_t>(p->value.numel()), ++seed);
    for (float& x : v) x = std::round(x * 64.0f) / 64.0f;
    Tensor t = Tensor::from_vector(v, p->value.shape());
    if (p->name == "wte") t.slice(0, c.vocab_size, c.padded_vocab_size() - c.vocab_size).zero();
    params[p->name] = t;
  }
  return params;
}

// f16 bits of a float that f16 holds exactly as a normal number, or zero.
std::uint16_t exact_f16(float x) {
  if (x == 0.0f) return 0;
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint32_t exponent = ((bits >> 23) & 0xFFu) - 127 + 15;
  return static_cast<std::uint16_t>(((bits >> 16) & 0x8000u) | (exponent << 10) |
                                    ((bits & 0x7FFFFFu) >> 13));
}

Tensor to_half(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  const std::vector<float> v = t.to_vector();
  auto* bits = static_cast<std::uint16_t*>(out.raw_data());
  for (std::size_t i = 0; i < v.size(); ++i)
    bits[i] = dtype == DType::BF16 ? float_to_bf16(v[i]).bits : exact_f16(v[i]);
  return out;
}

void expect_imported(const ModelConfig& c, const std::string& dir,
                     const std::map<std::string, Tensor>& params) {
  GptModel model(c);
  import_hf_weights(c, dir, model.parameters());
  for (const Parameter* p : model.parameters())
    EXPECT_EQ(p->value.to_vector(), params.at(p->name).to_vector()) << p->name;
}

TEST(HfImportFiles, HalfPrecisionWeightsWidenExactly) {
  const ModelConfig c = small_model();
  const std::map<std::string, Tensor> params = exact_params(c);
  for (DType dtype : {DType::BF16, DType::F16}) {
    ScratchDir dir("hf-half");
    std::vector<std::pair<std::string, Tensor>> half;
    for (const auto& [name, t] : to_hf_gpt2(c, params)) half.emplace_back(name, to_half(t, dtype));
    write_safetensors(dir.file("model.safetensors"), half);
    expect_imported(c, dir.path().string(), params);
  }
}

TEST(HfImportFiles, F16DecodesEveryKindOfNumber) {
  EXPECT_EQ(f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_float(0xC000), -2.0f);
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);                 // the largest
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14));    // the smallest normal
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));    // the smallest subnormal
  EXPECT_EQ(f16_to_float(0x03FF), std::ldexp(1023.0f, -24));  // the largest subnormal
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)) && f16_to_float(0x8000) == 0.0f);
  EXPECT_TRUE(std::isinf(f16_to_float(0x7C00)) && f16_to_float(0x7C00) > 0);
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
}

// Two shards and the index Hugging Face writes beside them.
void write_sharded(const ScratchDir& dir, const std::vector<std::pair<std::string, Tensor>>& hf,
                   const std::string& index_override = "") {
  const std::size_t half = hf.size() / 2;
  const std::vector<std::pair<std::string, Tensor>> first(
      hf.begin(), hf.begin() + static_cast<std::ptrdiff_t>(half));
  const std::vector<std::pair<std::string, Tensor>> second(
      hf.begin() + static_cast<std::ptrdiff_t>(half), hf.end());
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), first);
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), second);
  std::ofstream index(dir.file("model.safetensors.index.json"));
  if (!index_override.empty()) {
    index << index_override;
    return;
  }
  index << "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {";
  for (std::size_t i = 0; i < hf.size(); ++i)
    index << (i ? ", " : "") << "\"" << hf[i].first << "\": \"model-0000" << (i < half ? 1 : 2)
          << "-of-00002.safetensors\"";
  index << "}}";
}

TEST(HfImportFiles, ShardedWeightsLoadThroughTheirIndex) {
  const ModelConfig c = small_model();
  const std::map<std::string, Tensor> params = exact_params(c);
  ScratchDir dir("hf-sharded");
  write_sharded(dir, to_hf_gpt2(c, params));
  expect_imported(c, dir.path().string(), params);
}

// Beside shards and their index, model.safetensors is what transformers loads: so does this.
TEST(HfImportFiles, OneFileComesBeforeAnIndex) {
  const ModelConfig c = small_model();
  const std::map<std::string, Tensor> params = exact_params(c);
  std::map<std::string, Tensor> others;
  for (const auto& [name, t] : params) {
    others[name] = t.clone();
    others[name].fill(0.5f);
  }
  ScratchDir dir("hf-both");
  write_sharded(dir, to_hf_gpt2(c, others));
  write_safetensors(dir.file("model.safetensors"), to_hf_gpt2(c, params));
  expect_imported(c, dir.path().string(), params);
}

TEST(HfImportFiles, DamagedIndexesAreRefusedNamingWhatIsWrong) {
  const ModelConfig c = small_model();
  const auto hf = to_hf_gpt2(c, exact_params(c));
  auto expect_refused = [&](const std::string& index, const std::string& message) {
    ScratchDir dir("hf-bad-index");
    write_sharded(dir, hf, index);
    GptModel model(c);
    try {
      import_hf_weights(c, dir.path().string(), model.parameters());
      ADD_FAILURE() << "accepted: " << index;
    } catch (const CheckpointError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("model.init_from '" + dir.path().string() + "'"), std::string::npos)
          << what;
      EXPECT_NE(what.find(message), std::string::npos) << what;
    }
  };
  expect_refused("{\"weight_map\": [", "model.safetensors.index.json' is not valid JSON");
  expect_refused("{\"metadata\": {}}", "has no \"weight_map\"");
  expect_refused(
      "{\"weight_map\": {\"wte\": \"../elsewhere.safetensors\"}}",
      "tensor 'wte' maps to '../elsewhere.safetensors', not a file name in the directory");
  // The index names one shard: the other's tensors are missing.
  expect_refused("{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\"}}",
                 "GPT-2 weights have no 'transformer.h.1.ln_1.weight'");
}

}  // namespace
}  // namespace ternion
