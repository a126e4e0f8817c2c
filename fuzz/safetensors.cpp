// A safetensors file (checkpoints, Hugging Face imports): the header, then every tensor read.
#include "framework/safetensors.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ternion::fuzz::input_file(data, size, ".safetensors");
  ternion::fuzz::accepts_or_refuses([&] {
    const ternion::SafetensorsFile file = ternion::SafetensorsFile::open(path);
    for (const ternion::SafetensorsEntry& entry : file.entries()) (void)file.read(entry.name);
  });
  return 0;
}
