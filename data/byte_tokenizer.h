// Byte-level tokenizer: token = byte value, vocabulary 256.
//
// Needs no vocabulary file and round-trips any byte string exactly, so a freshly built
// checkout can train on any text. Decoding is lossy only for ids a byte model never emits
// from its own vocabulary: ids outside [0, 256) decode as '?'.
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

}  // namespace ternion
