// Byte-level tokenizer: token = byte value, vocabulary 256.
//
// Needs no vocabulary file and round-trips any byte string exactly, so a freshly built
// checkout can train on any text. Ids outside [0, 256), which a byte model never emits but a
// model trained on other tokens (GPT-2's, say) does, decode as "<id>" (such a model's run names
// its tokenizer: data/tokenizer.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ternion {

inline constexpr std::int64_t kByteVocabSize = 256;

std::vector<std::uint16_t> encode_bytes(std::string_view text);
std::string decode_bytes(std::span<const std::int32_t> tokens);
// Why `prompt` cannot be a model's input as bytes: "" when it has bytes and every one is below
// vocab_size, else that it is empty or the first byte that is not (a model of fewer than 256
// tokens has no token for it).
std::string prompt_problem(std::string_view prompt, std::int64_t vocab_size);

}  // namespace ternion
