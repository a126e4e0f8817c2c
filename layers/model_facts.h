// What a model holds and costs, derived from the model itself: each fact below comes from
// building the model's modules with shapes only (framework/parameter.h: ShapeOnlyParameters),
// for any family and any registered block, so nothing restates the architecture.
//
//   parameters_on_rank       the parameters one rank of a tensor x pipeline x data layout holds
//                            (the dry run prints it per rank; the trainer logs what it built)
//   forward_flops_per_token  the figure throughput and MFU are quoted against, in the trainer's
//                            logs, the benchmarks and the GPU check alike (training: 3x)
//
// The sharding is Megatron's, which the layers follow: column-parallel output features and
// row-parallel input features split over tp, norms and row-parallel biases replicated, the
// token embedding vocab-parallel. Pipeline stages take the blocks as pipeline_stage_blocks
// says; the embedding lives on the first stage, the final norm and the head on the last. A
// head tied to the embedding on a last stage without it holds a copy of its wte shard (kept
// equal by the embedding group's gradient all-reduce), so a pipeline group counts wte twice.
// Data parallelism replicates: every dp rank holds the same count.
#pragma once

#include <cstdint>

#include "layers/model_config.h"
#include "parallel/parallel_config.h"
#include "parallel/rank_layout.h"

namespace ternion {

// Blocks [begin, end) of pipeline stage `pp_rank` when n_layer blocks go over pp_size stages:
// as evenly as possible, the first n_layer % pp_size stages holding one more.
struct StageBlocks {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
};
StageBlocks pipeline_stage_blocks(std::int64_t n_layer, std::int64_t pp_size, std::int64_t pp_rank);

// With `virtual_stages` chunks per pipeline rank (interleaving), rank s holds the blocks of
// virtual stages s, pp + s, 2 pp + s, ... Run ParallelConfig::validate_model_fit first: a
// model that does not shard over the layout's tp fails here with an internal error.
std::int64_t parameters_on_rank(const ModelConfig& config, const RankLayout& layout, int rank,
                                std::int64_t virtual_stages = 1);

// Forward FLOPs per token of the whole model at full context: the sum of its layers'
// Layer::forward_flops_per_token.
double forward_flops_per_token(const ModelConfig& config);
// A training step's model FLOPs per token: the forward and the backward's two GEMMs for each
// of its own, 3x the forward. Recomputation is not counted, as MFU counts model FLOPs.
double training_flops_per_token(const ModelConfig& config);

// The sizes ParallelConfig::validate_model_fit checks against the layout, so that the shards
// above are whole.
ModelShardingShape model_sharding_shape(const ModelConfig& config);

}  // namespace ternion
