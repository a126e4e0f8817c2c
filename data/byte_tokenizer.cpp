#include "data/byte_tokenizer.h"

#include <cstdio>

namespace ternion {

std::vector<std::uint16_t> encode_bytes(std::string_view text) {
  std::vector<std::uint16_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i)
    tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string decode_bytes(std::span<const std::int32_t> tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (std::int32_t token : tokens) {
    if (token >= 0 && token < kByteVocabSize) {
      text += static_cast<char>(token);
    } else {
      text.append("<").append(std::to_string(token)).append(">");
    }
  }
  return text;
}

std::string prompt_problem(std::string_view prompt, std::int64_t vocab_size) {
  // A sample continues its prompt: with no token to continue, any first token would be a guess.
  if (prompt.empty()) return "the prompt is empty: a sample continues at least one token";
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    const auto byte = static_cast<unsigned char>(prompt[i]);
    if (byte < vocab_size) continue;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", byte);
    return "the prompt's byte " + std::string(hex) + " (at offset " + std::to_string(i) +
           ") has no token in a vocabulary of " + std::to_string(vocab_size) +
           " (prompts are bytes: they need bytes below model.vocab_size)";
  }
  return "";
}

}  // namespace ternion
