// Sampling text from a model: the prompt's tokens, then max_tokens tokens drawn one at a time
// (temperature, top-k, top-p, a seeded random stream), by rerunning the window (any layout) or
// through a KV cache (one rank).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/tokenizer.h"
#include "layers/gpt_model.h"

namespace ternion {

struct SampleOptions {
  std::string prompt;
  std::int64_t max_tokens = 200;
  double temperature = 0.8;
  std::int64_t top_k = 40;
  double top_p =
      1.0;  // in (0, 1]: the smallest set of likeliest tokens whose probability reaches it
  std::uint64_t seed = 0;
  Tokenizer tokenizer = Tokenizer::bytes();  // encodes the prompt, decodes the sample
  // Tokens each new one attends to, at most the context the model is made for (0 = seq_len);
  // past it the window slides, renumbered from position 0.
  std::int64_t context = 0;
  // Sampling this token ends the text before it, as the end of a document (-1: none).
  std::int32_t stop_token = -1;
};

// Samples `options.max_tokens` tokens after `options.prompt` (temperature, top-k, top-p, seeded),
// or fewer where options.stop_token comes first:
// `logits_of` maps tokens [1, T] to logits [1, T, padded_vocab]; windows of the last
// options.context tokens are padded at their end to a multiple of `window_multiple` (sequence
// parallelism). No KV cache: each new token reruns its window (any layout: `logits_of` may be
// collective).
std::string generate_text(const ModelConfig& model, const SampleOptions& options,
                          std::int64_t window_multiple,
                          const std::function<Tensor(const Tensor&)>& logits_of);
// The same text as generate_text on `model`'s logits (the same sampling step and random
// stream), through a KV cache (layers/kv_cache_decoder.h): while the tokens fit in the
// context, each new token runs one position; past it, each token re-primes the cache with the
// window of the last options.context tokens, as the windowed path renumbers it. `model` is the
// whole "transformer" model on one rank.
std::string generate_text_cached(const ModelConfig& model_config, const GptModel& model,
                                 const SampleOptions& options);

}  // namespace ternion
