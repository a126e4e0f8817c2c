#include "data/byte_level.h"

#include <cstring>

#include "data/bpe_tokenizer.h"

namespace ternion {

namespace byte_level {
namespace {

bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> code_point{};
  std::array<std::int16_t, 512> byte{};  // every code point of the alphabet is below U+0200
  Alphabet() {
    byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
      byte[code_point[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

char32_t byte_to_code_point(std::uint8_t b) { return alphabet().code_point[b]; }

int code_point_to_byte(char32_t c) { return c < 512 ? alphabet().byte[c] : -1; }

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

char32_t decode_utf8(std::string_view text, std::size_t pos, int* length) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(pos);
  *length = utf8_length(lead);
  if (*length == 1) return lead;
  char32_t c = lead & (0x7F >> *length);
  for (int i = 1; i < *length; ++i) c = (c << 6) | (byte(pos + i) & 0x3F);
  return c;
}

std::string to_text(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char b : bytes) append_utf8(text, byte_to_code_point(static_cast<std::uint8_t>(b)));
  return text;
}

std::optional<std::string> to_bytes(std::string_view text) {
  std::string bytes;
  bytes.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    int length = 0;
    const int b = code_point_to_byte(decode_utf8(text, pos, &length));
    if (b < 0) return std::nullopt;
    bytes += static_cast<char>(b);
    pos += static_cast<std::size_t>(length);
  }
  return bytes;
}

}  // namespace byte_level

std::int64_t first_invalid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    // Eight ASCII bytes at a time: most text is mostly ASCII.
    if (i + 8 <= n) {
      std::uint64_t word;
      std::memcpy(&word, p + i, 8);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    const std::uint8_t lead = p[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The range the second byte must fall in excludes overlong forms, surrogates and code
    // points above U+10FFFF; later bytes are plain continuations.
    int length = 0;
    std::uint8_t low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return static_cast<std::int64_t>(i);
    }
    if (i + static_cast<std::size_t>(length) > n || p[i + 1] < low || p[i + 1] > high)
      return static_cast<std::int64_t>(i);
    for (int k = 2; k < length; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return static_cast<std::int64_t>(i);
    i += static_cast<std::size_t>(length);
  }
  return -1;
}

}  // namespace ternion
