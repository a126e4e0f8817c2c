// TokenShard: a memory-mapped token file in one of llm.c's two `.bin` layouts.
//
//   bytes [0, 1024)     header: 256 little-endian int32
//                         header[0] = magic, header[1] = version, header[2] = token count N,
//                         the rest zero
//   bytes [1024, ...)   N little-endian tokens, nothing after them
//
//   magic      version   tokens    llm.c's name (dev/data/data_common.py, HEADERS_INFO)
//   20240520   1         uint16    "gpt-2"
//   20240801   7         uint32    "llama-3"
//
// Only these two (magic, version) pairs are read, so files interchange with llm.c's both ways.
//
// `open` validates the whole layout before handing the shard out, so every later read is in
// bounds: a file that is missing, shorter than the header, has another magic or version, or
// whose size disagrees with N tokens of the header's width (truncated or with trailing bytes)
// throws DataError with one line naming the file and the problem. The mapping is read-only and
// shared: several samplers, and several ranks on one host, read the same page-cache pages.
// Movable, not copyable; the mapping lives as long as the object.
//
// `write_token_file` writes the same layout atomically (`path.tmp.<pid>`, fsync, rename), so a
// reader never sees a half-written file, and throws DataError naming the file on any failure.
// It writes version 1 unless a token needs 32 bits or the caller asks for them, so byte-level
// and GPT-2 data stay readable by every llm.c reader. Tokens are in [0, 2^31): the trainer
// hands them on as int32.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ternion {

inline constexpr std::int32_t kTokenFileMagic16 = 20240520;
inline constexpr std::int32_t kTokenFileVersion16 = 1;
inline constexpr std::int32_t kTokenFileMagic32 = 20240801;
inline constexpr std::int32_t kTokenFileVersion32 = 7;
inline constexpr std::int64_t kTokenFileHeaderInts = 256;
inline constexpr std::int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

// How a file stores its tokens: U16 is version 1, U32 is version 7.
enum class TokenWidth : std::uint8_t { U16, U32 };
inline const char* token_width_name(TokenWidth width) {
  return width == TokenWidth::U32 ? "uint32" : "uint16";
}

class TokenShard {
 public:
  static TokenShard open(const std::string& path);

  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

  std::int64_t size() const { return size_; }  // token count
  TokenWidth width() const { return tokens32_ != nullptr ? TokenWidth::U32 : TokenWidth::U16; }
  // Unchecked, like a vector's. One predictable branch per call; bulk readers use copy_tokens.
  std::uint32_t operator[](std::int64_t i) const {
    return tokens32_ != nullptr ? tokens32_[i] : tokens16_[i];
  }
  // Tokens [first, first + count) as int32, the dtype of a batch: the hot path of every
  // sampler, branching on the width once per call. Throws InternalError when out of range.
  void copy_tokens(std::int64_t first, std::int64_t count, std::int32_t* out) const;
  const std::string& path() const { return path_; }

  // The largest token in the file (0 for an empty file), so the trainer can check that every
  // token is below the model's vocabulary size (a foreign file's token >= 2^31 shows here too,
  // before copy_tokens would wrap it). Scans the file once, on first call.
  std::uint32_t max_token() const;

 private:
  TokenShard(std::string path, void* mapping, std::size_t mapping_bytes);

  std::string path_;
  void* mapping_ = nullptr;  // the whole file, header included
  std::size_t mapping_bytes_ = 0;
  // Exactly one is set while the shard holds a file; both null once moved from.
  const std::uint16_t* tokens16_ = nullptr;
  const std::uint32_t* tokens32_ = nullptr;
  std::int64_t size_ = 0;
  // -1 until computed. Atomic so concurrent const callers are safe; at worst two of them both
  // scan and store the same value.
  mutable std::atomic<std::int64_t> max_token_{-1};
};

// Every token must lie in [0, 2^31). Without `width`, version 1 when every token is below 65536,
// else version 7; with it, that width (U16 with a token above 65535 throws DataError).
void write_token_file(const std::string& path, std::span<const std::int64_t> tokens,
                      std::optional<TokenWidth> width = std::nullopt);
void write_token_file(const std::string& path, std::span<const std::int32_t> tokens,
                      std::optional<TokenWidth> width = std::nullopt);
// uint16 tokens, as the byte tokenizer makes: version 1 unless `width` asks for U32.
void write_token_file(const std::string& path, std::span<const std::uint16_t> tokens,
                      TokenWidth width = TokenWidth::U16);

}  // namespace ternion
