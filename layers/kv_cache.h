// The key/value cache of incremental decoding, and the attention over it: attention layers'
// inference mode. A forward whose MicroBatchInfo carries a KvCache runs its tokens at
// positions cache.positions() .. (the embedding's learned positions and rotary angles alike),
// and each attention layer stores its new keys and values under its own slot and attends to
// every cached position, instead of the causal window of its input alone. One new token then
// costs one row of every matrix multiply and O(positions) attention, the same layers computing
// it as in training (layers/kv_cache_decoder.h drives it).
//
// Grouped-query attention caches its key/value heads only: the packed per-head [q | k | v]
// rows that attention takes repeat each group's key and value for its queries_per_kv query
// heads, and the cache keeps the first of them.
//
// One rank, CPU, F32 (the generator's setting), inference only: no dropout, nothing saved for
// a backward.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "framework/tensor.h"

namespace ternion {

class KvCache {
 public:
  explicit KvCache(std::int64_t capacity) : capacity_(capacity) {}

  std::int64_t positions() const { return positions_; }  // the next token's position
  std::int64_t capacity() const { return capacity_; }
  void reset() { positions_ = 0; }
  // After a forward over `rows` new positions (every layer has stored them).
  void advance(std::int64_t rows);

  // Stores the keys and values of `packed` [1, rows, heads * 3 * hs] (kernels/attention.h's
  // layout) at positions() .. positions() + rows - 1 in `owner`'s slot, and returns the
  // attention [1, rows, heads * hs] of each row's queries over the cached positions up to its
  // own (query head h reads key/value head h / queries_per_kv).
  Tensor attend(const void* owner, const Tensor& packed, std::int64_t heads,
                std::int64_t queries_per_kv);

 private:
  struct Slot {
    Tensor keys, values;  // [kv_heads, capacity, hs]
  };
  std::int64_t capacity_;
  std::int64_t positions_ = 0;
  std::unordered_map<const void*, Slot> slots_;
};

}  // namespace ternion
