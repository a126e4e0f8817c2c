// A Hugging Face config.json, checked against a model of each family before an import.
#include "fuzz/fuzz_input.h"
#include "training/hf_export.h"
#include "training/hf_llama.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  ternion::ModelConfig gpt2;
  ternion::ModelConfig llama;
  llama.family = "llama";
  llama.n_kv_head = 2;
  llama.rope_scaling_factor = 8;
  ternion::fuzz::accepts_or_refuses(
      [&] { ternion::check_hf_gpt2_config(gpt2, json, "config.json"); });
  ternion::fuzz::accepts_or_refuses(
      [&] { ternion::check_hf_llama_config(llama, json, "config.json"); });
  return 0;
}
