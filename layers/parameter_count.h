// How many parameters each rank holds under a tensor x pipeline x data layout, without
// building anything: the dry run prints it per rank, so a layout's memory can be judged
// before a job starts.
//
// The sharding is Megatron's, which the tensor- and pipeline-parallel layers follow:
//   column-parallel (output features split over tp): QKV projection and MLP up-projection,
//     weight [out / tp, in] and bias [out / tp]
//   row-parallel (input features split over tp): attention output and MLP down-projection,
//     weight [out, in / tp]; the bias [out] is replicated (added once, after the all-reduce)
//   replicated: every LayerNorm, the position embedding wpe [seq_len, C]
//   vocab-parallel: the token embedding wte [padded_vocab / tp, C]
// Pipeline: the blocks are spread over the stages as evenly as possible, the first
// n_layer % pp stages holding one more; the embeddings (wte, wpe) live on the first stage;
// ln_f and the LM head, tied to wte, on the last. With pp > 1 the last stage keeps its own
// copy of its wte shard (the two copies are kept equal by the embedding group's gradient
// all-reduce), so the sum over a pipeline group counts wte twice; with pp == 1 it is one
// tensor, counted once. Data parallelism replicates: every dp rank holds the same count.
//
// ParallelConfig::validate_model_fit(doc, model_sharding_shape(config)) checks first that the
// model shards evenly. Only the built-in "transformer" block's sharding is known; other block
// types throw ConfigError naming model.block.
#pragma once

#include <cstdint>

#include "layers/model_config.h"
#include "parallel/parallel_config.h"
#include "parallel/rank_layout.h"

namespace ternion {

// Blocks [begin, end) of pipeline stage `pp_rank` when n_layer blocks go over pp_size stages.
struct StageBlocks {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
};
StageBlocks pipeline_stage_blocks(std::int64_t n_layer, std::int64_t pp_size, std::int64_t pp_rank);

// With `virtual_stages` chunks per pipeline rank (interleaving), rank s holds the blocks of
// virtual stages s, pp + s, 2 pp + s, ...
std::int64_t parameters_on_rank(const ModelConfig& config, const RankLayout& layout, int rank,
                                std::int64_t virtual_stages = 1);

// The sizes ParallelConfig::validate_model_fit checks against the layout, so the counts above
// are whole numbers.
ModelShardingShape model_sharding_shape(const ModelConfig& config);

}  // namespace ternion
