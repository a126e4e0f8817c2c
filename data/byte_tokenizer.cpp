#include "data/byte_tokenizer.h"

namespace ternion {

std::vector<std::uint16_t> encode_bytes(std::string_view text) {
  std::vector<std::uint16_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i)
    tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string decode_bytes(std::span<const std::int32_t> tokens) {
  std::string text(tokens.size(), '?');
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= 0 && tokens[i] < kByteVocabSize) text[i] = static_cast<char>(tokens[i]);
  return text;
}

}  // namespace ternion
