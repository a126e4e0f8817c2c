// The YAML config with its whole validation (ternion-train's --config), on one rank and on 8.
#include "fuzz/fuzz_input.h"
#include "training/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  for (std::int64_t world : {1, 8})
    ternion::fuzz::accepts_or_refuses(
        [&] { (void)ternion::TrainConfig::parse(yaml, "fuzz.yaml", {}, world); });
  return 0;
}
