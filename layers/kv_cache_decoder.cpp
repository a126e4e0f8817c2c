#include "layers/kv_cache_decoder.h"

#include "layers/layer_registry.h"

namespace ternion {

// The built-in block's attention has a cached mode; a user's block (even one registered as
// "transformer") may not.
bool KvCacheDecoder::supports(const ModelConfig& config) {
  return LayerRegistry::instance().is_built_in(config.block);
}

KvCacheDecoder::KvCacheDecoder(const GptModel& model, std::int64_t capacity)
    : model_(model), cache_(capacity > 0 ? capacity : model.config().seq_len) {
  const ModelConfig& config = model.config();
  TN_CHECK(capacity >= 0 && capacity <= config.context_made_for(), "a KV cache of ", capacity,
           " positions; the model is made for ", config.context_made_for());
  TN_CHECK_AS(ConfigError, supports(config), "the KV-cache decoder runs the built-in block "
              "type 'transformer', not '", config.block, "'");
  const ModelChunk& chunk = model.chunk();
  TN_CHECK(chunk.has_embedding && chunk.has_head && chunk.first_block == 0 &&
               chunk.end_block == config.n_layer,
           "the KV-cache decoder needs the whole model, not a pipeline chunk");
  for (const Parameter* p : model.parameters())
    TN_CHECK(!p->is_sharded(), "the KV-cache decoder runs on one rank; ", p->name,
             " is a tensor-parallel shard");
}

Tensor KvCacheDecoder::append(std::int32_t token) {
  TN_CHECK(positions() < capacity(), "the KV cache is full (", capacity(),
           " positions): reset() or prime() it with the window to continue");
  return run_positions(std::span<const std::int32_t>(&token, 1));
}

Tensor KvCacheDecoder::prime(std::span<const std::int32_t> tokens) {
  TN_CHECK(!tokens.empty() && static_cast<std::int64_t>(tokens.size()) <= capacity(),
           "prime with ", tokens.size(), " tokens; the KV cache holds 1 to ", capacity());
  reset();
  return run_positions(tokens);
}

Tensor KvCacheDecoder::run_positions(std::span<const std::int32_t> tokens) {
  const auto rows = static_cast<std::int64_t>(tokens.size());
  const std::int64_t vocab = model_.config().padded_vocab_size();
  Tensor token_ids = Tensor::empty({1, rows}, DType::I32);
  for (std::int64_t r = 0; r < rows; ++r) {
    TN_CHECK(0 <= tokens[r] && tokens[r] < vocab, "token ", tokens[r], " outside the ", vocab,
             " embedding rows");
    token_ids.data<std::int32_t>()[r] = tokens[r];
  }
  MicroBatchInfo info;
  info.training = false;
  info.kv_cache = &cache_;
  ActivationContext ctx(info);
  const Tensor logits = model_.logits(token_ids, ctx);  // [1, rows, padded_vocab]
  cache_.advance(rows);
  return logits.select(1, rows - 1).contiguous().view({vocab});
}

}  // namespace ternion
