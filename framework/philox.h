// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
//
// A random number is a pure function of (key, counter): no state advances, so any element of
// any tensor can be generated alone, on any rank, on CPU or GPU, in any order. This is what
// makes every parallel layout compute the same training run as one rank:
//
//   parameter init:  value of element i of parameter P  = f(seed, hash("P"), i)
//   dropout:         keep bit of element i at a site     = f(seed, mix(step, hash(site)), i)
//
// where i is the element's index in the *global* (unsharded) tensor; for dropout the global
// tensor spans the whole global batch, so the micro-batch a sample falls in (and the
// data-parallel rank that processes it) enters through its index in the global batch.
// The counter is {i_lo, i_hi, stream_lo, stream_hi}; the key is {seed_lo, seed_hi}.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "framework/features.h"

namespace ternion {

struct Philox4 {
  std::uint32_t v[4];
};

inline constexpr std::uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

TN_HOST_DEVICE inline Philox4 philox4x32_10(Philox4 counter, std::uint32_t key0,
                                            std::uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxMul0) * counter.v[0];
    std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxMul1) * counter.v[2];
    auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    counter = {{hi1 ^ counter.v[1] ^ key0, lo1, hi0 ^ counter.v[3] ^ key1, lo0}};
    key0 += kPhiloxWeyl0;
    key1 += kPhiloxWeyl1;
  }
  return counter;
}

// One random stream: a seed and a 64-bit stream id (from a name, a step, a site...).
struct RngStream {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
};

TN_HOST_DEVICE inline Philox4 philox_bits(RngStream s, std::uint64_t index) {
  Philox4 counter = {{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                      static_cast<std::uint32_t>(s.stream),
                      static_cast<std::uint32_t>(s.stream >> 32)}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(s.seed),
                       static_cast<std::uint32_t>(s.seed >> 32));
}

// philox_bits in the form a CPU vector loop over calls needs (kernels/cpu/dropout.cpp): each
// 32-bit word held in a 64-bit integer, so that a word takes a 64-bit lane and each product is
// one widening multiply with no lanes repacked, and the multipliers passed in (kPhiloxMul0,
// kPhiloxMul1; the caller says why). The same numbers as philox_bits.
TN_HOST_DEVICE inline Philox4 philox_bits_wide(RngStream s, std::uint64_t index,
                                               std::uint32_t mul0, std::uint32_t mul1) {
  constexpr std::uint64_t kLow = 0xFFFFFFFFu;
  std::uint64_t c0 = index & kLow, c1 = index >> 32, c2 = s.stream & kLow, c3 = s.stream >> 32;
  auto key0 = static_cast<std::uint32_t>(s.seed), key1 = static_cast<std::uint32_t>(s.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(static_cast<std::uint32_t>(c0)) * mul0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(static_cast<std::uint32_t>(c2)) * mul1;
    const std::uint64_t next0 = ((p1 >> 32) ^ c1 ^ key0) & kLow;
    const std::uint64_t next2 = ((p0 >> 32) ^ c3 ^ key1) & kLow;
    c1 = p1 & kLow;
    c3 = p0 & kLow;
    c0 = next0;
    c2 = next2;
    key0 += kPhiloxWeyl0;
    key1 += kPhiloxWeyl1;
  }
  return {{static_cast<std::uint32_t>(c0), static_cast<std::uint32_t>(c1),
           static_cast<std::uint32_t>(c2), static_cast<std::uint32_t>(c3)}};
}

// Uniform in [0, 1) with 24 random bits (every value exactly representable in f32).
TN_HOST_DEVICE inline float philox_uniform(RngStream s, std::uint64_t index) {
  return static_cast<float>(philox_bits(s, index).v[0] >> 8) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller; computed in double so CPU and GPU agree to the last bit
// wherever their libm's double log/cos/sqrt are correctly rounded.
TN_HOST_DEVICE inline float philox_normal(RngStream s, std::uint64_t index) {
  Philox4 r = philox_bits(s, index);
  double u1 = (static_cast<double>(r.v[0]) + 0.5) * (1.0 / 4294967296.0);  // (0, 1)
  double u2 = static_cast<double>(r.v[1]) * (1.0 / 4294967296.0);          // [0, 1)
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
}

// Stream ids.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr std::uint64_t hash_name(std::string_view name) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a, then a finaliser to spread the bits
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return splitmix64(h);
}

constexpr std::uint64_t mix_stream(std::uint64_t a, std::uint64_t b) {
  return splitmix64(a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2)));
}

// The stream that initialises parameter `name`.
inline RngStream parameter_stream(std::uint64_t seed, std::string_view name) {
  return {seed, hash_name(name)};
}

// The stream of dropout site `site` (a layer's name plus its role) at optimizer step `step`.
inline RngStream dropout_stream(std::uint64_t seed, std::int64_t step, std::string_view site) {
  return {seed, mix_stream(hash_name(site), static_cast<std::uint64_t>(step))};
}

}  // namespace ternion
