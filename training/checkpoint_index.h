// The JSON files of a checkpoint directory (training/checkpoint.h): checkpoint.json says what
// the checkpoint is, each rank_NNNNN.json what the pieces in that rank's safetensors file are.
//
//   checkpoint.json  {"format": "ternion-checkpoint-1", "step": 100, "ranks": 4,
//                     "optimizer": "adamw", "family": "gpt2", "block": "transformer",
//                     "model": {"vocab_size": 256, ...}}
//   rank_00003.json  {"rank": 3, "pieces": [{"tensor": "model/wte", "key": "p0",
//                     "global_shape": [256, 64], "local_shape": [128, 64], "shard_dim": 0,
//                     "shard_offset": 128, "begin": 0, "end": 8192, "crc32": 1234}, ...]}
//
// Written and read through nlohmann/json (framework/strict_json.h). A loader indexes memory
// with these numbers, so every field read is checked before it is used: its type, its range,
// and each piece's slice against its tensor's shape. A damaged file is a CheckpointError naming
// the file and the field, never a crash. Checkpoints written before "optimizer", "family" and
// "block" were recorded lack them; they still load (a checkpoint without "family" is GPT-2's).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"
#include "layers/model_config.h"

namespace ternion {

// The "format" of checkpoint.json and of the safetensors files' metadata.
inline constexpr const char* kCheckpointFormat = "ternion-checkpoint-1";

struct CheckpointMeta {
  std::int64_t step = 0;
  // Optimizer updates applied (AdamW's bias correction counts them: steps skipped for
  // non-finite gradients are not); the step in checkpoints that predate recording it.
  std::int64_t updates = 0;
  int ranks = 1;  // how many rank_NNNNN files there are
  // The model sizes it was saved with (checkpoint_model_sizes), as recorded.
  std::vector<std::pair<std::string, std::int64_t>> model;
  // The family's function settings (ModelFamily::function_settings) as recorded, under
  // "model_settings"; none in checkpoints that predate recording them.
  std::vector<std::pair<std::string, double>> settings;
  std::string optimizer;  // optimizer.type; empty in checkpoints that predate recording it
  std::string family = "gpt2";  // model.family
  std::string block;      // model.block; empty in checkpoints that predate recording it
};

// Flat elements [begin, end) of one rank's shard of `tensor`. The shard has `local_shape`: the
// slice [shard_offset, shard_offset + local_shape[shard_dim]) along shard_dim of the tensor's
// `global_shape`, or the whole tensor when shard_dim is -1. `key` names its data in the rank's
// safetensors file; `crc` is that data's CRC-32.
struct CheckpointPiece {
  std::string tensor, key;
  Shape global_shape, local_shape;
  std::int64_t shard_dim = -1, shard_offset = 0, begin = 0, end = 0;
  std::uint32_t crc = 0;
};

// The model sizes a checkpoint records, which a loader's model must match (all but
// vocab_pad_multiple: the padding rows load across it), and whether its LM head is tied to the
// embedding (tie_embeddings, 1 or 0).
std::vector<std::pair<std::string, std::int64_t>> checkpoint_model_sizes(const ModelConfig& m);

std::string checkpoint_meta_json(const CheckpointMeta& meta);
std::string rank_index_json(int rank, const std::vector<CheckpointPiece>& pieces);

// CheckpointError naming `path` and the field for a file that cannot be parsed, a missing
// field, a value of the wrong type or out of range, or a piece that does not lie within its
// tensor.
CheckpointMeta read_checkpoint_meta(const std::string& path);
// The index of rank `rank`'s pieces (its "rank" field must say so).
std::vector<CheckpointPiece> read_rank_index(const std::string& path, int rank);

}  // namespace ternion
