// A checkpoint's JSON: its checkpoint.json (meta) and a rank's index of pieces.
#include "fuzz/fuzz_input.h"
#include "training/checkpoint_index.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ternion::fuzz::input_file(data, size, ".json");
  ternion::fuzz::accepts_or_refuses([&] { (void)ternion::read_checkpoint_meta(path); });
  ternion::fuzz::accepts_or_refuses([&] { (void)ternion::read_rank_index(path, 0); });
  return 0;
}
