#include "layers/kv_cache_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layer_norm.h"
#include "kernels/matmul.h"
#include "kernels/vector_math.h"

namespace ternion {

namespace {

// y = x W^T + b: x [rows, in], W [out, in], b [out] -> [rows, out].
Tensor linear(const Tensor& x, const Parameter& weight, const Parameter& bias) {
  Tensor y = Tensor::empty({x.size(0), weight.value.size(0)}, DType::F32, x.device());
  matmul(y, x, weight.value, false, true);
  bias_add_forward(y, bias.value);
  return y;
}

Tensor layer_norm(const Tensor& x, const Parameter& weight, const Parameter& bias) {
  Tensor out = Tensor::empty(x.shape(), DType::F32, x.device());
  Tensor mean = Tensor::empty({x.size(0)}, DType::F32, x.device());
  Tensor rstd = Tensor::empty({x.size(0)}, DType::F32, x.device());
  layer_norm_forward(out, mean, rstd, x, weight.value, bias.value);
  return out;
}

}  // namespace

KvCacheDecoder::KvCacheDecoder(const GptModel& model) {
  const ModelConfig& config = model.config();
  TN_CHECK_AS(ConfigError, config.block == "transformer",
              "the KV-cache decoder runs block type 'transformer', not '", config.block, "'");
  const ModelChunk& chunk = model.chunk();
  TN_CHECK(chunk.has_embedding && chunk.has_head && chunk.first_block == 0 &&
               chunk.end_block == config.n_layer,
           "the KV-cache decoder needs the whole model, not a pipeline chunk");
  n_head_ = config.n_head;
  head_size_ = config.head_size();
  d_model_ = config.d_model;
  capacity_ = config.seq_len;
  vocab_size_ = config.padded_vocab_size();

  std::map<std::string, const Parameter*> by_name;
  for (const Parameter* p : model.parameters()) {
    TN_CHECK(!p->is_sharded(), "the KV-cache decoder runs on one rank; ", p->name,
             " is a tensor-parallel shard");
    by_name.emplace(p->name, p);
  }
  auto find = [&](const std::string& name, const Shape& shape) {
    const auto it = by_name.find(name);
    TN_CHECK(it != by_name.end(), "the model has no parameter ", name);
    TN_CHECK(it->second->value.shape() == shape, name, " is ", it->second->value.str(),
             ", expected ", shape_str(shape));
    return it->second;
  };
  const std::int64_t c = d_model_, ff = config.ff_width();
  wte_ = find("wte", {vocab_size_, c});
  wpe_ = find("wpe", {capacity_, c});
  ln_f_weight_ = find("ln_f.weight", {c});
  ln_f_bias_ = find("ln_f.bias", {c});
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    blocks_.push_back({find(h + "ln_1.weight", {c}), find(h + "ln_1.bias", {c}),
                       find(h + "attn.qkv.weight", {3 * c, c}), find(h + "attn.qkv.bias", {3 * c}),
                       find(h + "attn.proj.weight", {c, c}), find(h + "attn.proj.bias", {c}),
                       find(h + "ln_2.weight", {c}), find(h + "ln_2.bias", {c}),
                       find(h + "mlp.fc.weight", {ff, c}), find(h + "mlp.fc.bias", {ff}),
                       find(h + "mlp.proj.weight", {c, ff}), find(h + "mlp.proj.bias", {c})});
    caches_.push_back({Tensor::zeros({n_head_, capacity_, head_size_}),
                       Tensor::zeros({n_head_, capacity_, head_size_})});
  }
}

void KvCacheDecoder::reset() { positions_ = 0; }

Tensor KvCacheDecoder::append(std::int32_t token) {
  TN_CHECK(positions_ < capacity_, "the KV cache is full (", capacity_,
           " positions, the model's seq_len): reset() or prime() it with the window to continue");
  return run_positions(std::span<const std::int32_t>(&token, 1));
}

Tensor KvCacheDecoder::prime(std::span<const std::int32_t> tokens) {
  TN_CHECK(!tokens.empty() && static_cast<std::int64_t>(tokens.size()) <= capacity_, "prime with ",
           tokens.size(), " tokens; the KV cache holds 1 to ", capacity_);
  reset();
  return run_positions(tokens);
}

Tensor KvCacheDecoder::run_positions(std::span<const std::int32_t> tokens) {
  const auto rows = static_cast<std::int64_t>(tokens.size());
  TN_CHECK(positions_ + rows <= capacity_, rows, " positions after ", positions_, " of ", capacity_);
  Tensor token_ids = Tensor::empty({1, rows}, DType::I32);
  for (std::int64_t r = 0; r < rows; ++r) {
    TN_CHECK(0 <= tokens[r] && tokens[r] < vocab_size_, "token ", tokens[r], " outside the ",
             vocab_size_, " embedding rows");
    token_ids.data<std::int32_t>()[r] = tokens[r];
  }
  Tensor embedded = Tensor::empty({1, rows, d_model_});
  token_embedding_forward(embedded, token_ids, wte_->value);
  position_embedding_forward(embedded, wpe_->value.slice(0, positions_, rows));
  Tensor x = embedded.view({rows, d_model_});

  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const BlockWeights& w = blocks_[i];
    const Tensor qkv = linear(layer_norm(x, *w.ln_1_weight, *w.ln_1_bias), *w.qkv_weight, *w.qkv_bias);
    store_keys_values(caches_[i], qkv);
    const Tensor attn_out = linear(attend_to_cache(caches_[i], qkv), *w.attn_proj_weight,
                                   *w.attn_proj_bias);
    Tensor residual = Tensor::empty(x.shape());
    add(residual, x, attn_out);
    Tensor hidden = linear(layer_norm(residual, *w.ln_2_weight, *w.ln_2_bias), *w.fc_weight,
                           *w.fc_bias);
    gelu_forward(hidden, hidden);
    Tensor mlp_out = linear(hidden, *w.mlp_proj_weight, *w.mlp_proj_bias);
    add(mlp_out, residual, mlp_out);
    x = mlp_out;
  }
  positions_ += rows;

  // Only the last position's logits are wanted: the head runs on one row.
  const Tensor normed = layer_norm(x.slice(0, rows - 1, 1), *ln_f_weight_, *ln_f_bias_);
  Tensor logits = Tensor::empty({1, vocab_size_});
  matmul(logits, normed, wte_->value, false, true);
  return logits.view({vocab_size_});
}

void KvCacheDecoder::store_keys_values(BlockCache& cache, const Tensor& qkv) const {
  const std::int64_t rows = qkv.size(0), row_stride = 3 * d_model_;
  const std::size_t bytes = static_cast<std::size_t>(head_size_) * sizeof(float);
  const float* src = qkv.data<float>();
  float* keys = cache.keys.data<float>();
  float* values = cache.values.data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < n_head_; ++h) {
      const float* head_qkv = src + r * row_stride + h * 3 * head_size_;  // [q | k | v]
      const std::int64_t at = (h * capacity_ + positions_ + r) * head_size_;
      std::memcpy(keys + at, head_qkv + head_size_, bytes);
      std::memcpy(values + at, head_qkv + 2 * head_size_, bytes);
    }
  }
}

Tensor KvCacheDecoder::attend_to_cache(const BlockCache& cache, const Tensor& qkv) const {
  const std::int64_t rows = qkv.size(0), row_stride = 3 * d_model_, hs = head_size_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  Tensor attended = Tensor::empty({rows, d_model_});
  std::vector<float> probs(static_cast<std::size_t>(capacity_));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t last = positions_ + r;  // causal: keys [0, last]
    for (std::int64_t h = 0; h < n_head_; ++h) {
      const float* q = qkv.data<float>() + r * row_stride + h * 3 * hs;
      const float* keys = cache.keys.data<float>() + h * capacity_ * hs;
      const float* values = cache.values.data<float>() + h * capacity_ * hs;
      // The same steps as the attention kernel: scaled scores, softmax less the maximum,
      // normalised probabilities, then the weighted sum of the values.
      float max_score = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j <= last; ++j) {
        float dot = 0.0f;
        for (std::int64_t d = 0; d < hs; ++d) dot += q[d] * keys[j * hs + d];
        probs[j] = dot * scale;
        max_score = std::max(max_score, probs[j]);
      }
      float sum = 0.0f;
      for (std::int64_t j = 0; j <= last; ++j) {
        probs[j] = fast_exp(probs[j] - max_score);
        sum += probs[j];
      }
      const float inv_sum = 1.0f / sum;
      float* out = attended.data<float>() + r * d_model_ + h * hs;
      for (std::int64_t d = 0; d < hs; ++d) out[d] = 0.0f;
      for (std::int64_t j = 0; j <= last; ++j) {
        const float p = probs[j] * inv_sum;
        for (std::int64_t d = 0; d < hs; ++d) out[d] += p * values[j * hs + d];
      }
    }
  }
  return attended;
}

}  // namespace ternion
