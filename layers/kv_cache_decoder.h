// Incremental decoding with a key/value cache: each appended token runs one position through a
// whole one-rank GptModel of "transformer" blocks, attending to the keys and values that the
// earlier positions left in the cache, so a new token costs one row of every matrix multiply
// and O(positions) attention instead of a rerun of the whole window.
//
// A token at position t (t = positions() before the call):
//   x = wte[token] + wpe[t]                                           [1, C]
//   per block i:
//     qkv = ln_1(x) Wqkv^T + bqkv                                     [1, 3C], per head [q|k|v]
//     K_i[h, t, :] = k_h,  V_i[h, t, :] = v_h                         cache [n_head, seq_len, hs]
//     a_h = sum_{j<=t} softmax_j(q_h . K_i[h, j] / sqrt(hs)) V_i[h, j]
//     x = x + (a Wproj^T + bproj)
//     x = x + mlp(ln_2(x))
//   logits = ln_f(x) wte^T                                            [padded_vocab]
// which is the last row of GptModel::logits on tokens [0, t] (same kernels; the attention over
// the cache is written here, mirroring kernels/cpu/attention.cpp's arithmetic).
//
// Capacity: the cache holds model.seq_len positions, the model's learned positions. append
// past them is refused (TN_CHECK). The cache does not slide on purpose: the windowed path
// (generate_text) renumbers its window of the last seq_len tokens from position 0, and every
// cached key depends on its position, so after a slide no cached key is the one the windowed
// path would compute. A caller that wants the window re-primes with it: prime(tokens) resets
// and runs the tokens' positions in one batched pass. Past the context, each token therefore
// costs what the windowed path costs; before it, one position.
//
// Inference only: dropout is not applied (as in evaluation) and no activations are saved. The
// model's parameters are read in place at every call, so the decoder always sees the current
// weights and must not outlive the model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "layers/gpt_model.h"

namespace ternion {

class KvCacheDecoder {
 public:
  // `model`: the whole model (embedding, every block, head) of block type "transformer", on
  // one rank (no tensor-parallel shards).
  explicit KvCacheDecoder(const GptModel& model);

  // Forgets every cached position; the next token is position 0.
  void reset();
  // Runs `token` at position positions() and caches its keys and values; returns its logits
  // [padded_vocab]. Requires positions() < capacity().
  Tensor append(std::int32_t token);
  // reset(), then `tokens` (1 to capacity() of them) at positions 0.. in one batched pass;
  // returns the logits [padded_vocab] of the last.
  Tensor prime(std::span<const std::int32_t> tokens);

  std::int64_t positions() const { return positions_; }
  std::int64_t capacity() const { return capacity_; }
  bool full() const { return positions_ == capacity_; }

 private:
  struct BlockWeights {
    const Parameter *ln_1_weight, *ln_1_bias, *qkv_weight, *qkv_bias, *attn_proj_weight,
        *attn_proj_bias, *ln_2_weight, *ln_2_bias, *fc_weight, *fc_bias, *mlp_proj_weight,
        *mlp_proj_bias;
  };
  struct BlockCache {
    Tensor keys, values;  // [n_head, capacity, head_size]
  };

  // Runs tokens at positions positions_.. (caching them) and returns the last one's logits.
  Tensor run_positions(std::span<const std::int32_t> tokens);
  // Copies each row's keys and values from qkv [rows, 3C] into the cache at positions_ + row.
  void store_keys_values(BlockCache& cache, const Tensor& qkv) const;
  // attended [rows, C]: row r's query attends to the cached positions [0, positions_ + r].
  Tensor attend_to_cache(const BlockCache& cache, const Tensor& qkv) const;

  std::int64_t n_head_, head_size_, d_model_, capacity_, vocab_size_;
  const Parameter *wte_, *wpe_, *ln_f_weight_, *ln_f_bias_;
  std::vector<BlockWeights> blocks_;
  std::vector<BlockCache> caches_;
  std::int64_t positions_ = 0;
};

}  // namespace ternion
