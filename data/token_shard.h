// TokenShard: a memory-mapped token file in llm.c's `.bin` layout.
//
//   bytes [0, 1024)     header: 256 little-endian int32
//                         header[0] = 20240520 (magic), header[1] = 1 (version),
//                         header[2] = token count N, the rest zero
//   bytes [1024, ...)   N little-endian uint16 tokens, nothing after them
//
// `open` validates the whole layout before handing the shard out, so every later read is in
// bounds: a file that is missing, shorter than the header, has another magic or version, or
// whose size disagrees with N (truncated or with trailing bytes) throws DataError with one line
// naming the file and the problem. The mapping is read-only and shared: several samplers, and
// several ranks on one host, read the same page-cache pages. Movable, not copyable; the
// mapping lives as long as the object.
//
// `write_token_file` writes the same layout atomically (`path.tmp.<pid>`, fsync, rename), so a
// reader never sees a half-written file, and throws DataError naming the file on any failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>

namespace ternion {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersion = 1;
inline constexpr std::int64_t kTokenFileHeaderInts = 256;
inline constexpr std::int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

class TokenShard {
 public:
  static TokenShard open(const std::string& path);

  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

  std::int64_t size() const { return size_; }  // token count
  const std::uint16_t* tokens() const { return tokens_; }
  std::span<const std::uint16_t> span() const {
    return {tokens_, static_cast<std::size_t>(size_)};
  }
  // Unchecked, like a vector's: the hot path of every sampler.
  std::uint16_t operator[](std::int64_t i) const { return tokens_[i]; }
  const std::string& path() const { return path_; }

  // The largest token in the file (0 for an empty file), so the trainer can check that every
  // token is below the model's vocabulary size. Scans the file once, on first call.
  std::uint16_t max_token() const;

 private:
  TokenShard(std::string path, void* mapping, std::size_t mapping_bytes, std::int64_t size);

  std::string path_;
  void* mapping_ = nullptr;  // the whole file, header included
  std::size_t mapping_bytes_ = 0;
  const std::uint16_t* tokens_ = nullptr;
  std::int64_t size_ = 0;
  // -1 until computed. Atomic so concurrent const callers are safe; at worst two of them both
  // scan and store the same value.
  mutable std::atomic<std::int32_t> max_token_{-1};
};

void write_token_file(const std::string& path, std::span<const std::uint16_t> tokens);

}  // namespace ternion
