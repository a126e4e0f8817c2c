// CRC-32 as zlib, gzip and PNG compute it (zlib's own): crc32("123456789") == 0xCBF43926.
// Checkpoints record it for every piece they write.
//
// `seed` is the CRC of the bytes before these (0 for none), so a long stream can be checksummed
// in pieces: crc32(b, nb, crc32(a, na)) == crc32(a followed by b).
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>

namespace ternion {

inline std::uint32_t crc32(const void* data, std::size_t bytes, std::uint32_t seed = 0) {
  if (bytes == 0) return seed;  // zlib reads a null buffer as "the initial value": 0
  return static_cast<std::uint32_t>(::crc32_z(seed, static_cast<const Bytef*>(data), bytes));
}

}  // namespace ternion
