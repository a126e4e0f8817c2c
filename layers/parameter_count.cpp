#include "layers/parameter_count.h"

#include <algorithm>

#include "framework/error.h"
#include "layers/model_family.h"

namespace ternion {

StageBlocks pipeline_stage_blocks(std::int64_t n_layer, std::int64_t pp_size,
                                  std::int64_t pp_rank) {
  TN_CHECK(pp_size >= 1 && pp_rank >= 0 && pp_rank < pp_size, "stage ", pp_rank, " of ", pp_size);
  const std::int64_t base = n_layer / pp_size, extra = n_layer % pp_size;
  StageBlocks blocks;
  blocks.begin = pp_rank * base + std::min(pp_rank, extra);
  blocks.end = blocks.begin + base + (pp_rank < extra ? 1 : 0);
  return blocks;
}

std::int64_t parameters_on_rank(const ModelConfig& config, const RankLayout& layout, int rank,
                                std::int64_t virtual_stages) {
  TN_CHECK_AS(ConfigError, config.block == "transformer",
              "model.block: per-rank parameter "
              "counts know the sharding of the built-in 'transformer' block only, not '",
              config.block, "'");
  const std::int64_t tp = layout.tp_size, c = config.d_model;
  TN_CHECK(config.n_head % tp == 0 && config.kv_heads() % tp == 0 && config.ff_width() % tp == 0 &&
               config.padded_vocab_size() % tp == 0,
           "the model does not shard over tp = ", tp, " (ParallelConfig::validate_model_fit)");
  const RankPlacement& p = layout.at(rank);
  const std::int64_t token_embedding = config.padded_vocab_size() / tp * c;  // vocab-parallel
  // Chunk v of pipeline rank s is virtual stage v * pp + s (interleaving).
  std::int64_t blocks = 0;
  for (std::int64_t v = 0; v < virtual_stages; ++v)
    blocks += pipeline_stage_blocks(config.n_layer, layout.pp_size * virtual_stages,
                                    v * layout.pp_size + p.coords.pp_rank)
                  .size();
  const ModelFamily& family = model_family(config.family);
  const bool tied = family.ties_embeddings(config);
  std::int64_t count = blocks * family.block_parameters(config, tp);
  if (p.is_first_stage) count += token_embedding + family.position_parameters(config);
  if (p.is_last_stage) {
    count += family.final_norm_parameters(config);
    // The head's own weight, or its copy of the tied wte.
    if (!tied || !p.is_first_stage) count += token_embedding;
  }
  return count;
}

ModelShardingShape model_sharding_shape(const ModelConfig& config) {
  ModelShardingShape shape;
  shape.n_head = config.n_head;
  shape.n_kv_head = config.kv_heads();
  shape.n_layer = config.n_layer;
  shape.ff_width = config.ff_width();
  shape.ff_width_is_d_ff = config.d_ff > 0;
  shape.vocab_size = config.vocab_size;
  shape.vocab_pad_multiple = config.vocab_pad_multiple;
  shape.padded_vocab_size = config.padded_vocab_size();
  shape.seq_len = config.seq_len;
  return shape;
}

}  // namespace ternion
