// Philox4x32-10 (framework/philox.h) for eight consecutive counters at once, with AVX2
// intrinsics: the same numbers as philox_bits. Compilers vectorise philox_bits_wide's 32 x 32 ->
// 64-bit products well only where there is a 64-bit vector multiply (AVX-512DQ); on AVX2 GCC
// builds each from three vpmuludq and five shifts and adds, although one vpmuludq (which
// multiplies the low 32 bits of each 64-bit lane) is the product. Here it is one, and each
// word's high half is left as it falls: vpmuludq ignores it, and only low halves are kept.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "framework/philox.h"

namespace ternion::cpu {

// Word k = 0..3 of philox_bits(s, first + j) to words[k * stride + j], j = 0..7.
inline void philox_bits_x8(RngStream s, std::uint64_t first, std::uint32_t* words,
                           std::size_t stride) {
  const __m256i low = _mm256_set1_epi64x(0xFFFFFFFFll);
  const __m256i mul0 = _mm256_set1_epi64x(kPhiloxMul0), mul1 = _mm256_set1_epi64x(kPhiloxMul1);
  // Two sets of four counters (calls j and j + 4), a word per 64-bit lane.
  __m256i c0[2], c1[2];
  for (int h = 0; h < 2; ++h) {
    const std::uint64_t i = first + 4 * static_cast<std::uint64_t>(h);
    const __m256i index = _mm256_set_epi64x(static_cast<long long>(i + 3),
                                            static_cast<long long>(i + 2),
                                            static_cast<long long>(i + 1),
                                            static_cast<long long>(i));
    c0[h] = _mm256_and_si256(index, low);
    c1[h] = _mm256_srli_epi64(index, 32);
  }
  const __m256i stream_low = _mm256_set1_epi64x(static_cast<long long>(s.stream & 0xFFFFFFFFu));
  const __m256i stream_high = _mm256_set1_epi64x(static_cast<long long>(s.stream >> 32));
  __m256i c2[2] = {stream_low, stream_low}, c3[2] = {stream_high, stream_high};
  auto key0 = static_cast<std::uint32_t>(s.seed), key1 = static_cast<std::uint32_t>(s.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i k0 = _mm256_set1_epi64x(key0), k1 = _mm256_set1_epi64x(key1);
    for (int h = 0; h < 2; ++h) {
      const __m256i p0 = _mm256_mul_epu32(c0[h], mul0);
      const __m256i p1 = _mm256_mul_epu32(c2[h], mul1);
      const __m256i high1 = _mm256_srli_epi64(p1, 32), high0 = _mm256_srli_epi64(p0, 32);
      const __m256i next0 = _mm256_xor_si256(_mm256_xor_si256(high1, c1[h]), k0);
      const __m256i next2 = _mm256_xor_si256(_mm256_xor_si256(high0, c3[h]), k1);
      c1[h] = p1;  // its low half is the word; the high half is never read as one
      c3[h] = p0;
      c0[h] = next0;
      c2[h] = next2;
    }
    key0 += kPhiloxWeyl0;
    key1 += kPhiloxWeyl1;
  }
  // Each word's eight low halves in call order: set A's in the even 32-bit positions, set
  // B's shifted into the odd ones, then A0..A3 B0..B3.
  const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i* sets[4] = {c0, c1, c2, c3};
  for (int k = 0; k < 4; ++k) {
    const __m256i interleaved =
        _mm256_blend_epi32(sets[k][0], _mm256_slli_epi64(sets[k][1], 32), 0xAA);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + k * stride),
                        _mm256_permutevar8x32_epi32(interleaved, order));
  }
}

}  // namespace ternion::cpu

#endif  // __AVX2__
