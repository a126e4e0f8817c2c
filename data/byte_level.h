// GPT-2's byte-level alphabet and the UTF-8 helpers byte-level BPE needs.
//
// Byte-level BPE works on bytes, but tokenizer.json writes tokens as text: every byte b is
// written as one printable code point, byte_to_code_point(b) (GPT-2's `bytes_to_unicode`):
// the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves, and the other
// 68 bytes, in increasing order, become U+0100, U+0101, ... (so ' ' is 'Ġ' U+0120 and '\n' is
// 'Ċ' U+010A). A token's bytes are its code points mapped back.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ternion::byte_level {

// The code point written for byte b.
char32_t byte_to_code_point(std::uint8_t b);
// The byte a code point of the alphabet stands for, or -1 for one outside it.
int code_point_to_byte(char32_t c);

// Appends c (a Unicode scalar value) as UTF-8.
void append_utf8(std::string& out, char32_t c);
// The code point starting at text[pos] (valid UTF-8 assumed) and its length in bytes.
char32_t decode_utf8(std::string_view text, std::size_t pos, int* length);
// The length of the UTF-8 sequence a lead byte begins (1 for a continuation byte).
inline int utf8_length(std::uint8_t lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Bytes as tokenizer.json writes them ("Ġthe" for " the").
std::string to_text(std::string_view bytes);
// A token's text (valid UTF-8) back to bytes; nothing when a code point is outside the alphabet.
std::optional<std::string> to_bytes(std::string_view text);

}  // namespace ternion::byte_level
