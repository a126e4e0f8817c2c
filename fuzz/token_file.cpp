// A token file (ternion-prepare's and llm.c's .bin, versions 1 and 7): its header and contents.
#include "data/token_shard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ternion::fuzz::input_file(data, size, ".bin");
  ternion::fuzz::accepts_or_refuses([&] {
    const ternion::TokenShard shard = ternion::TokenShard::open(path);
    (void)shard.max_token();
  });
  return 0;
}
