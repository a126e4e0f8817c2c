#include "training/generation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "framework/philox.h"
#include "layers/kv_cache_decoder.h"

namespace ternion {

namespace {

// The prompt's tokens. A prompt the vocabulary has no tokens for is refused: dropping a token
// would sample from a prompt other than the one printed.
std::vector<std::int32_t> prompt_tokens(const ModelConfig& mc, const SampleOptions& options) {
  const std::string problem = options.tokenizer.prompt_problem(options.prompt, mc.vocab_size);
  TN_CHECK_AS(UsageError, problem.empty(), problem);
  std::vector<std::int32_t> tokens = options.tokenizer.encode_prompt(options.prompt);
  return tokens;
}

// The sampling step of both generators, so that they draw the same text from the same logits:
// the top-k of the real vocabulary in `logits` (a row of padded_vocab; equal logits ordered by
// id, so that a cut through a tie keeps the same tokens on every machine), weighted
// exp((logit - max) / temperature), cut to its top-p, chosen by the draw-th uniform of `stream`.
std::int32_t sample_token(const float* logits, const ModelConfig& mc, const SampleOptions& options,
                          const RngStream& stream, std::int64_t draw) {
  std::vector<std::int32_t> order(mc.vocab_size);
  std::iota(order.begin(), order.end(), 0);
  std::int64_t k =
      options.top_k > 0 ? std::min<std::int64_t>(options.top_k, mc.vocab_size) : mc.vocab_size;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](std::int32_t a, std::int32_t b) {
                      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                    });
  std::vector<double> weights(k);
  const double top = logits[order[0]];
  double total = 0.0;
  for (std::int64_t j = 0; j < k; ++j) {
    weights[j] = std::exp((logits[order[j]] - top) / options.temperature);
    total += weights[j];
  }
  // Top-p, as transformers applies it after temperature and top-k: a token stays while the
  // likelier ones before it hold less than p of the probability (the likeliest always stays).
  double before = 0.0;
  for (std::int64_t j = 0; j < k; ++j) {
    if (j > 0 && before >= options.top_p * total) {
      k = j;
      total = before;
      break;
    }
    before += weights[j];
  }
  double r = philox_uniform(stream, static_cast<std::uint64_t>(draw)) * total;
  std::int64_t choice = 0;
  while (choice + 1 < k && r >= weights[choice]) r -= weights[choice++];
  return order[choice];
}

// The sampled tokens as text, without a stop token that ends them.
std::string decode_generated(const SampleOptions& options, const std::vector<std::int32_t>& tokens,
                             std::size_t prompt_length) {
  std::span<const std::int32_t> sampled = std::span(tokens).subspan(prompt_length);
  if (!sampled.empty() && sampled.back() == options.stop_token)
    sampled = sampled.first(sampled.size() - 1);
  return options.tokenizer.decode(sampled);
}

// The window each new token attends to (options.context, seq_len by default).
std::int64_t context_of(const ModelConfig& mc, const SampleOptions& options) {
  TN_CHECK(options.context >= 0 && options.context <= mc.context_made_for(), "a context of ",
           options.context, " tokens; the model is made for ", mc.context_made_for());
  return options.context > 0 ? options.context : mc.seq_len;
}

}  // namespace

std::string generate_text(const ModelConfig& mc, const SampleOptions& options,
                          std::int64_t window_multiple,
                          const std::function<Tensor(const Tensor&)>& logits_of) {
  std::vector<std::int32_t> tokens = prompt_tokens(mc, options);
  const std::size_t prompt_length = tokens.size();
  const std::int64_t context = context_of(mc, options);
  const RngStream stream{options.seed, hash_name("sample")};
  for (std::int64_t i = 0; i < options.max_tokens; ++i) {
    // No KV cache here: each new token reruns its window (cheap at sample sizes).
    const std::int64_t window = std::min<std::int64_t>(context, tokens.size());
    // Sequence parallelism splits the sequence evenly over the tensor group: pad the window
    // at its end, which causal attention keeps from changing the positions before.
    const std::int64_t parts = window_multiple;
    const std::int64_t padded = (window + parts - 1) / parts * parts;
    Tensor input = Tensor::zeros({1, padded}, DType::I32);
    std::copy(tokens.end() - window, tokens.end(), input.data<std::int32_t>());
    Tensor logits = logits_of(input);
    const float* last = logits.data<float>() + (window - 1) * logits.size(2);
    tokens.push_back(sample_token(last, mc, options, stream, i));
    if (tokens.back() == options.stop_token) break;
  }
  return decode_generated(options, tokens, prompt_length);
}

std::string generate_text_cached(const ModelConfig& mc, const GptModel& model,
                                 const SampleOptions& options) {
  TN_CHECK(mc.vocab_size == model.config().vocab_size && mc.seq_len == model.config().seq_len,
           "generate_text_cached: the config is not the model's");
  std::vector<std::int32_t> tokens = prompt_tokens(mc, options);
  const std::size_t prompt_length = tokens.size();
  const std::int64_t context = context_of(mc, options);
  const RngStream stream{options.seed, hash_name("sample")};
  // No larger than the run needs: a model made for 128k positions, asked for 200 tokens.
  const std::int64_t needed =
      std::min<std::int64_t>(context, static_cast<std::int64_t>(prompt_length)) +
      std::min(options.max_tokens, context);  // (no overflow at any max_tokens)
  KvCacheDecoder decoder(model, std::min(context, std::max<std::int64_t>(needed, 1)));
  for (std::int64_t i = 0; i < options.max_tokens; ++i) {
    // The cache holds every token but the newest while they fit (the window starts at token
    // 0), so the newest is one append; once they no longer fit, the window of the last
    // `context` tokens starts at position 0 again and the cache is rebuilt from it.
    Tensor logits;
    if (i > 0 && !decoder.full()) {
      logits = decoder.append(tokens.back());
    } else {
      const std::size_t window = std::min<std::size_t>(context, tokens.size());
      logits = decoder.prime(std::span<const std::int32_t>(tokens).last(window));
    }
    tokens.push_back(sample_token(logits.data<float>(), mc, options, stream, i));
    if (tokens.back() == options.stop_token) break;
  }
  return decode_generated(options, tokens, prompt_length);
}

}  // namespace ternion
