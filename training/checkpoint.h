// Checkpoints: the complete training state, saved in parallel by the ranks that own each
// piece, loaded by any layout.
//
//   save_dir/step_0000100/
//     rank_00003.safetensors   this rank's pieces (standard safetensors: JSON header + raw data)
//     rank_00003.json          what each piece is: tensor, global shape, which slice, CRC-32
//     checkpoint.json          step, model shape, optimizer type and file count (written last)
//     config.yaml              the run's configuration
//     tokenizer.json           the run's BPE tokenizer (data.tokenizer), when it has one
//   save_dir/latest            "step_0000100", replaced only once a checkpoint is complete
//
// Every tensor is parameter-shaped: "model/<name>", "optim/<kind>/<name>". A piece is
// elements [begin, end) of one rank's shard of it (the shard a slice of the global tensor
// along shard_dim), so a loader of any tensor x pipeline x data x ZeRO layout reassembles the
// global tensor from whatever pieces hold it and takes its own shard. Replicated copies are
// written once. The sampler, the learning-rate schedule, dropout and initialisation are pure
// functions of (seed, step), so the step restores them.
//
// Saving is atomic: everything goes to step_N.tmp/, is fsynced, and is renamed to step_N/ only
// when every rank has finished; `latest` is updated (temporary name, then rename) after that,
// so a save that dies half-way leaves the previous checkpoint and `latest` intact. Then older
// checkpoints are pruned to checkpoint.keep (training/checkpoint_retention.h says which).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "framework/parameter.h"
#include "layers/gpt_model.h"
#include "layers/model_config.h"
#include "parallel/comm/communicator.h"
#include "training/checkpoint_index.h"
#include "training/checkpoint_retention.h"
#include "training/train_config.h"

namespace ternion {

// One rank's piece of a parameter-shaped tensor: flat elements [begin, end) of `param`'s local
// shard. For saving, `data` holds those elements. For loading, `data` is where they go: the
// tensor of end - begin f32 elements they are loaded into (on any device), or undefined, and
// the load makes a CPU tensor of them.
struct ShardedTensor {
  std::string name;
  const Parameter* param = nullptr;
  Tensor data;
  std::int64_t begin = 0, end = 0;
};

// Checks at setup that this rank can write checkpoints into config.checkpoint.save_dir (when
// set): creates it, as a save would, and writes and removes a probe file. A ConfigError naming
// checkpoint.save_dir otherwise, so that a run does not train for hours to fail at its first
// save. Local: every rank that writes calls it, and the ranks agree on the outcome.
void check_save_dir_writable(const TrainConfig& config, int rank);

// Saves the state after `step` into config.checkpoint.save_dir, then deletes what `retention`
// prunes (training/checkpoint_retention.h). Collective over `world` (null: this rank alone).
// CheckpointError on I/O failure, on every rank, with the incomplete directory removed.
// `updates`: the optimizer updates applied by then (CheckpointMeta::updates).
void save_checkpoint(const TrainConfig& config, const Tokenizer& tokenizer, std::int64_t step,
                     std::int64_t updates, CheckpointRetention& retention,
                     const std::vector<ShardedTensor>& mine, Communicator* world);


// The checkpoint directory `load` names: a directory (a save_dir: its latest), or "latest" in
// `save_dir`.
std::string resolve_checkpoint(const std::string& load, const std::string& save_dir);

// What a run resumes from: checkpoint.load resolved, or "" where there is nothing to resume
// (no load, or 'latest' before the first save: the same config serves the first launch of a
// job and every requeue, as in Megatron-LM and torchtitan; logged).
std::string checkpoint_to_resume(const CheckpointConfig& checkpoint);

// Fills every target from the checkpoint in `dir`, one tensor at a time (a CPU target's values
// are read straight into it); returns its checkpoint.json (the step, the optimizer updates
// applied, what it was saved with). A failure may leave the targets part loaded: the caller
// does not use them then. CheckpointError naming the
// file, field or tensor for a missing or corrupt checkpoint (training/checkpoint_index.h), a
// checksum mismatch, a model of another shape, or optimizer state of another optimizer.type
// than `optimizer_type` (empty: the targets are the model's alone).
CheckpointMeta load_checkpoint(const std::string& dir, const ModelConfig& model,
                               const std::string& optimizer_type,
                               std::vector<ShardedTensor>& targets);

// The global shape of each tensor the checkpoint in `dir` holds, by name (its indexes as
// load_checkpoint checks them).
std::map<std::string, Shape> checkpoint_tensor_shapes(const std::string& dir);

// A model key of a checkpoint's config (`path` as below; `fallback` where it is absent), read
// before the config is: model.block before its block type must be registered (a program that
// handles some block types names the others as such), model.family.
std::string checkpoint_model_key(const std::string& path, const std::string& key,
                                 const std::string& fallback);
std::string checkpoint_block_type(const std::string& path);

// The whole model of a checkpoint (`path`: a checkpoint directory, or a save_dir with a
// `latest`) on one rank, whatever layout trained it; its configuration in *config.
std::unique_ptr<GptModel> load_model_from_checkpoint(const std::string& path, TrainConfig* config);
// The tokenizer a checkpoint's text goes through (`config` its configuration, as
// load_model_from_checkpoint reads it): its tokenizer.json, or bytes where its run had none.
// CheckpointError when the run named one and the copy is missing or unreadable.
Tokenizer checkpoint_tokenizer(const std::string& path, const TrainConfig& config);
// Whether `path` exists, without std::filesystem's own error (a name too long for the OS, say):
// that is a CheckpointError naming the path and the OS's reason. For checkpoints and the model
// directories model.init_from reads.
bool checkpoint_path_exists(const std::filesystem::path& path);
// The files under `path` (a step's directory, or a save_dir and its steps'): what a program
// that reads the checkpoint must not write over.
std::vector<std::string> checkpoint_files(const std::string& path);

}  // namespace ternion
