#include "layers/model_facts.h"

#include <algorithm>
#include <unordered_set>

#include "framework/error.h"
#include "layers/gpt_model.h"
#include "parallel/comm/layout_only_communicator.h"

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
  const RankPlacement& p = layout.at(rank);
  LayoutOnlyCommunicator tp_group(p.coords.tp_rank, layout.tp_size, "tensor (layout only)");
  TensorParallel tp;
  if (layout.tp_size > 1) tp.group = &tp_group;
  const ShapeOnlyParameters shapes_only;
  const auto chunks = build_pipeline_chunks(config, tp, layout.pp_size, p.coords.pp_rank,
                                            static_cast<int>(virtual_stages));
  // A parameter two chunks share (a tied embedding) is held once.
  std::unordered_set<const Parameter*> seen;
  std::int64_t count = 0;
  for (const auto& chunk : chunks)
    for (const Parameter* param : chunk->parameters())
      if (seen.insert(param).second) count += param->value.numel();
  return count;
}

double forward_flops_per_token(const ModelConfig& config) {
  const ShapeOnlyParameters shapes_only;
  return GptModel(config).forward_flops_per_token();
}

double training_flops_per_token(const ModelConfig& config) {
  return 3.0 * forward_flops_per_token(config);
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
