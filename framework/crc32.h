// CRC-32 as zlib, gzip and PNG compute it (zlib's own): crc32("123456789") == 0xCBF43926.
// Checkpoints record it for every piece they write.
//
// `seed` is the CRC of the bytes before these (0 for none), so a long stream can be checksummed
// in pieces: crc32(b, nb, crc32(a, na)) == crc32(a followed by b), and pieces checksummed apart
// join with crc32_combine.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

namespace ternion {

inline std::uint32_t crc32(const void* data, std::size_t bytes, std::uint32_t seed = 0) {
  if (bytes == 0) return seed;  // zlib reads a null buffer as "the initial value": 0
  return static_cast<std::uint32_t>(::crc32_z(seed, static_cast<const Bytef*>(data), bytes));
}

// The CRC-32 of a followed by b, from crc32(a) and crc32(b) of b's `b_bytes`.
inline std::uint32_t crc32_combine(std::uint32_t a, std::uint32_t b, std::size_t b_bytes) {
  return static_cast<std::uint32_t>(::crc32_combine64(a, b, static_cast<z_off64_t>(b_bytes)));
}

// The CRC-32 of the bytes [0, bytes), in chunks of kCrcChunk that OpenMP's threads share:
// `each(begin, length)` returns a chunk's (having read it into place, say). zlib's CRC runs at
// about 2 GB/s a core, most of a checkpoint piece's load, so a chunk is checksummed by the
// thread that has it in cache. An exception `each` throws is rethrown: the first chunk's,
// where several throw (a file cut short fails every chunk from the cut on).
inline constexpr std::size_t kCrcChunk = std::size_t{8} << 20;
template <class Each>
std::uint32_t crc32_by_chunks(std::size_t bytes, const Each& each) {
  const auto chunks = static_cast<std::int64_t>((bytes + kCrcChunk - 1) / kCrcChunk);
  if (chunks <= 1) return each(std::size_t{0}, bytes);
  auto length_of = [&](std::int64_t c) {
    return std::min(kCrcChunk, bytes - static_cast<std::size_t>(c) * kCrcChunk);
  };
  std::vector<std::uint32_t> sums(static_cast<std::size_t>(chunks));
  std::exception_ptr failure;
  std::int64_t failed_chunk = chunks;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    try {
      const auto begin = static_cast<std::size_t>(c) * kCrcChunk;
      sums[static_cast<std::size_t>(c)] = each(begin, length_of(c));
    } catch (...) {
#pragma omp critical(ternion_crc32_failure)
      if (c < failed_chunk) {
        failure = std::current_exception();
        failed_chunk = c;
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
  std::uint32_t crc = sums[0];
  for (std::int64_t c = 1; c < chunks; ++c)
    crc = crc32_combine(crc, sums[static_cast<std::size_t>(c)], length_of(c));
  return crc;
}

// crc32 of the bytes, its chunks over OpenMP's threads.
inline std::uint32_t crc32_parallel(const void* data, std::size_t bytes) {
  const auto* base = static_cast<const unsigned char*>(data);
  return crc32_by_chunks(
      bytes, [&](std::size_t begin, std::size_t length) { return crc32(base + begin, length); });
}

}  // namespace ternion
