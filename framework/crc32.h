// CRC-32 as zlib, gzip and PNG compute it: the reflected CRC with polynomial 0xEDB88320,
// initial value and final xor 0xFFFFFFFF. crc32("123456789") == 0xCBF43926.
//
// `seed` is the CRC of the bytes before these (0 for none), so a long stream can be checksummed
// in pieces: crc32(b, nb, crc32(a, na)) == crc32(a followed by b).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ternion {

std::uint32_t crc32(const void* data, std::size_t bytes, std::uint32_t seed = 0);

}  // namespace ternion
