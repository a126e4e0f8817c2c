// Incremental decoding with a key/value cache: each appended token runs one position through
// the whole one-rank model in its inference mode (layers/kv_cache.h), its attention layers
// reading the keys and values the earlier positions left in the cache, so a new token costs
// one row of every matrix multiply and O(positions) attention instead of a rerun of the whole
// window. The layers are the model's own, whatever its family, so a token's logits are the
// last row of GptModel::logits on its prefix.
//
// Capacity: the cache holds a given number of positions, at most the context the model is made
// for (ModelConfig::context_made_for: seq_len, or a Llama's max_context), seq_len by default.
// append past them is refused (TN_CHECK). The cache does not slide on purpose: the windowed
// path (generate_text) renumbers its window of the last tokens from position 0, and every cached
// key depends on its position, so after a slide no cached key is the one the windowed path would
// compute. A caller that wants the window re-primes with it: prime(tokens) resets and runs the
// tokens' positions in one batched pass. Past the context, each token therefore costs what the
// windowed path costs; before it, one position.
//
// Inference only: dropout is not applied (as in evaluation) and nothing is kept for a
// backward. The model's parameters are read in place at every call, so the decoder always sees
// the current weights and must not outlive the model.
#pragma once

#include <cstdint>
#include <span>

#include "layers/gpt_model.h"
#include "layers/kv_cache.h"

namespace ternion {

class KvCacheDecoder {
 public:
  // `model`: the whole model (embedding, every block, head) on one rank, on the CPU in f32,
  // of a family's built-in block (supports()). `capacity`: positions held (0 = seq_len).
  explicit KvCacheDecoder(const GptModel& model, std::int64_t capacity = 0);
  // Whether the decoder knows `config`'s blocks: the families' built-in one, whose attention
  // has the cached mode (a registered custom block may not).
  static bool supports(const ModelConfig& config);

  // Forgets every cached position; the next token is position 0.
  void reset() { cache_.reset(); }
  // Runs `token` at position positions() and caches its keys and values; returns its logits
  // [padded_vocab]. Requires positions() < capacity().
  Tensor append(std::int32_t token);
  // reset(), then `tokens` (1 to capacity() of them) at positions 0.. in one batched pass;
  // returns the logits [padded_vocab] of the last.
  Tensor prime(std::span<const std::int32_t> tokens);

  std::int64_t positions() const { return cache_.positions(); }
  std::int64_t capacity() const { return cache_.capacity(); }
  bool full() const { return positions() == capacity(); }

 private:
  // Runs tokens at positions positions().. (caching them) and returns the last one's logits.
  Tensor run_positions(std::span<const std::int32_t> tokens);

  const GptModel& model_;
  KvCache cache_;
};

}  // namespace ternion
