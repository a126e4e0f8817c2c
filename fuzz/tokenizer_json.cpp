// A Hugging Face tokenizer.json; where one is accepted, text through it (with its template's
// special tokens) and back.
#include "data/bpe_tokenizer.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  ternion::fuzz::accepts_or_refuses([&] {
    const auto tokenizer = ternion::BpeTokenizer::from_json(json, "tokenizer.json");
    const std::vector<std::int32_t> ids = tokenizer.encode_with_special_tokens(
        "Hello, world! It's 2024 \xc3\xa9t\xc3\xa9 <|endoftext|>\n\n  x\t\xf0\x9f\x98\x80");
    tokenizer.decode(ids);
  });
  return 0;
}
