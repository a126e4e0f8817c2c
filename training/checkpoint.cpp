#include "training/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "framework/crc32.h"
#include "framework/logging.h"
#include "framework/safetensors.h"
#include "layers/model_family.h"
#include "training/checkpoint_index.h"

namespace ternion {

namespace fs = std::filesystem;

namespace {

// A short text that reads back as `value`: 500000 and 0.00001 (fixed while that is short),
// 1e-30, never 1.0000000000000001e-05.
std::string shortest_text(double value) {
  char text[400];
  auto written = std::to_chars(text, text + sizeof text, value, std::chars_format::fixed);
  if (written.ec != std::errc() || written.ptr - text > 12)
    written = std::to_chars(text, text + sizeof text, value);
  return std::string(text, written.ptr);
}

std::string step_name(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%07lld", static_cast<long long>(step));
  return name;
}

// The step of a complete checkpoint's directory name ("step_0000100"), or -1 for any other
// name (step_N.tmp, step_N.old, files of the user's).
std::int64_t step_of_name(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5 || name[5] < '0' || name[5] > '9')
    return -1;
  std::int64_t step = -1;
  const char* last = name.data() + name.size();
  const auto [end, error] = std::from_chars(name.data() + 5, last, step);
  return error == std::errc() && end == last ? step : -1;
}

std::string rank_name(int rank, const char* extension) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05d%s", rank, extension);
  return name;
}

// A file written completely and flushed to disk, or a CheckpointError.
void write_text_file(const std::string& path, const std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  TN_CHECK_AS(CheckpointError, file != nullptr, "cannot write '", path,
              "': ", std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const bool flushed = std::fflush(file) == 0 && ::fsync(fileno(file)) == 0;
  const bool closed = std::fclose(file) == 0;
  TN_CHECK_AS(CheckpointError, written && flushed && closed, "cannot write '", path, "': ",
              std::strerror(errno));
}

void fsync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Every rank's verdict; true when all succeeded.
bool all_succeeded(Communicator* world, bool mine) {
  if (world == nullptr || world->size() == 1) return mine;
  Tensor flag = Tensor::from_vector({mine ? 0.0f : 1.0f}, {1});
  world->all_reduce(flag, ReduceOp::Max);
  return flag.data<float>()[0] == 0.0f;
}

// Calls run(i, g, n) for the elements [begin, end) (row-major) of a shard of `local` shape,
// cut from `global` along `shard_dim` (-1: not cut) at `shard_offset`, in runs of n elements
// that are contiguous in both: element i + k of the shard is element g + k of the whole. A
// run is a stretch of the shard's rows along shard_dim and the dimensions after it.
template <class Run>
void for_each_run(const Shape& local, const Shape& global, std::int64_t shard_dim,
                  std::int64_t shard_offset, std::int64_t begin, std::int64_t end, Run&& run) {
  std::int64_t inner = 1;  // the elements of one index along shard_dim
  for (std::size_t d = static_cast<std::size_t>(shard_dim + 1); d < local.size(); ++d)
    inner *= local[d];
  const std::int64_t span = shard_dim < 0 ? shape_numel(local) : local[shard_dim] * inner;
  const std::int64_t global_span = shard_dim < 0 ? span : global[shard_dim] * inner;
  const std::int64_t start = shard_dim < 0 ? 0 : shard_offset * inner;
  for (std::int64_t i = begin; i < end;) {
    const std::int64_t outer = span > 0 ? i / span : 0, within = i - outer * span;
    const std::int64_t n = std::min(end - i, span - within);
    run(i, outer * global_span + start + within, n);
    i += n;
  }
}

// A piece and the safetensors file that holds its data.
struct LocatedPiece {
  CheckpointPiece piece;
  std::string file;
};

// checkpoint.json of `dir`, which only a complete checkpoint has.
std::string meta_path_of(const std::string& dir) {
  const std::string meta_path = (fs::path(dir) / "checkpoint.json").string();
  TN_CHECK_AS(CheckpointError, checkpoint_path_exists(dir), "checkpoint '", dir,
              "' does not exist");
  TN_CHECK_AS(CheckpointError, checkpoint_path_exists(meta_path), "'", dir,
              "' is not a complete checkpoint (no checkpoint.json)");
  return meta_path;
}

// Every piece of every tensor, from the indexes of the `ranks` ranks that saved `dir`.
std::map<std::string, std::vector<LocatedPiece>> read_pieces(const std::string& dir, int ranks) {
  std::map<std::string, std::vector<LocatedPiece>> pieces;
  for (int r = 0; r < ranks; ++r) {
    const std::string index_path = (fs::path(dir) / rank_name(r, ".json")).string();
    TN_CHECK_AS(CheckpointError, checkpoint_path_exists(index_path), "checkpoint '", dir,
                "' is missing '", rank_name(r, ".json"), "'");
    const std::string file = (fs::path(dir) / rank_name(r, ".safetensors")).string();
    for (CheckpointPiece& piece : read_rank_index(index_path, r)) {
      const std::string tensor = piece.tensor;
      pieces[tensor].push_back({std::move(piece), file});
    }
  }
  return pieces;
}

// The steps of the complete checkpoints in `save_dir`.
std::vector<std::int64_t> checkpoint_steps(const std::string& save_dir) {
  std::vector<std::int64_t> steps;
  for (const auto& entry : fs::directory_iterator(save_dir)) {
    const std::int64_t step = step_of_name(entry.path().filename().string());
    if (step >= 0 && entry.is_directory()) steps.push_back(step);
  }
  return steps;
}

// "step_0000005, step_0000010" (the first and last few of a long list).
std::string step_names(const std::vector<std::int64_t>& steps) {
  std::string out;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps.size() > 6 && i == 3) {
      out += ", ... (" + std::to_string(steps.size() - 5) + " more)";
      i = steps.size() - 3;
    }
    out += (out.empty() ? "" : ", ") + step_name(steps[i]);
  }
  return out;
}

// Deletes what `retention` prunes after the save of `saved` (rank 0). The new checkpoint is
// complete by then, so a checkpoint that cannot be deleted is reported and left, not an error
// of the save (the run goes on; the next save tries again).
void prune_checkpoints(const std::string& save_dir, std::int64_t saved,
                       CheckpointRetention& retention) {
  const CheckpointRetention::Decision decision =
      retention.after_save(saved, checkpoint_steps(save_dir));
  for (std::int64_t step : decision.remove) {
    const fs::path old = fs::path(save_dir) / step_name(step);
    std::error_code ec;
    fs::remove_all(old, ec);
    if (ec)
      log_info("ternion: warning: could not delete the old checkpoint ", old.string(), " (",
               ec.message(), "); checkpoint.keep leaves it");
  }
  if (decision.report_newer)
    log_info("ternion: checkpoint.save_dir '", save_dir, "' holds checkpoints of steps after ",
             saved, " from another run (", step_names(decision.newer),
             "): left in place while ahead of this run's saves; once it saves past them, "
             "checkpoint.keep counts them among the older checkpoints");
}

}  // namespace

void check_save_dir_writable(const TrainConfig& config, int rank) {
  const std::string& save_dir = config.checkpoint.save_dir;
  if (save_dir.empty()) return;
  auto refuse = [&](const std::string& why) {
    TN_THROW(ConfigError, config.source.empty() ? "" : config.source + ": ",
             "checkpoint.save_dir: ", why);
  };
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) refuse("cannot create directory '" + save_dir + "': " + ec.message());
  if (!fs::is_directory(save_dir, ec)) refuse("'" + save_dir + "' is not a directory");
  // A name of this rank and process alone: ranks probing one shared directory at once must
  // not remove one another's file.
  const std::string probe = (fs::path(save_dir) / (".write-probe." + rank_name(rank, "") + "." +
                                                   std::to_string(::getpid())))
                                .string();
  try {
    write_text_file(probe, "probe\n");
  } catch (const CheckpointError& e) {
    fs::remove(probe, ec);
    refuse(e.what());
  }
  fs::remove(probe, ec);
  if (ec) refuse("cannot remove '" + probe + "' (a write probe): " + ec.message());
}

void save_checkpoint(const TrainConfig& config, const Tokenizer& tokenizer, std::int64_t step,
                     std::int64_t updates, CheckpointRetention& retention,
                     const std::vector<ShardedTensor>& mine, Communicator* world) {
  const std::string& save_dir = config.checkpoint.save_dir;
  const int rank = world != nullptr ? world->rank() : 0;
  const int ranks = world != nullptr ? world->size() : 1;
  const std::string final_dir = (fs::path(save_dir) / step_name(step)).string();
  const std::string tmp_dir = final_dir + ".tmp";
  std::string error;
  try {
    if (rank == 0) {
      fs::remove_all(tmp_dir);  // what a save that died left behind
      fs::create_directories(tmp_dir);
    }
  } catch (const std::exception& e) {
    error = std::string("cannot create '") + tmp_dir + "': " + e.what();
  }
  if (!all_succeeded(world, error.empty()))
    TN_THROW(CheckpointError, error.empty() ? "checkpoint save failed on rank 0" : error);

  // This rank's pieces.
  try {
    std::vector<std::pair<std::string, Tensor>> tensors;
    std::vector<CheckpointPiece> pieces;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const ShardedTensor& t = mine[i];
      const Tensor data = t.data.contiguous().to(Device::cpu());  // written from the host
      const std::string key = "p" + std::to_string(i);
      tensors.emplace_back(key, data);
      pieces.push_back({t.name, key, t.param->global_shape, t.param->value.shape(),
                        t.param->shard_dim, t.param->shard_offset, t.begin, t.end,
                        crc32_parallel(data.raw_data(), data.nbytes())});
    }
    write_safetensors((fs::path(tmp_dir) / rank_name(rank, ".safetensors")).string(), tensors,
                      {{"format", kCheckpointFormat}});
    write_text_file((fs::path(tmp_dir) / rank_name(rank, ".json")).string(),
                    rank_index_json(rank, pieces));
  } catch (const Error& e) {
    error = e.what();
  }
  const bool written = all_succeeded(world, error.empty());
  if (!written) {
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(tmp_dir, ec);
    }
    TN_THROW(CheckpointError, "checkpoint of step ", step, " not saved: ",
             error.empty() ? "another rank failed to write its part" : error);
  }

  // Rank 0 completes it: the description, the rename, `latest`, and the old ones pruned.
  if (rank == 0) {
    try {
      CheckpointMeta meta;
      meta.step = step;
      meta.updates = updates;
      meta.ranks = ranks;
      meta.model = checkpoint_model_sizes(config.model);
      meta.settings = model_family(config.model.family).function_settings(config.model);
      meta.optimizer = config.optimizer.type;
      meta.family = config.model.family;
      meta.block = config.model.block;
      write_text_file((fs::path(tmp_dir) / "config.yaml").string(), config_yaml(config));
      if (const BpeTokenizer* bpe = tokenizer.bpe())
        write_text_file((fs::path(tmp_dir) / "tokenizer.json").string(), bpe->to_json());
      write_text_file((fs::path(tmp_dir) / "checkpoint.json").string(), checkpoint_meta_json(meta));
      fsync_directory(tmp_dir);
      // Saving a step that exists already (after resuming from an older one): the old copy
      // is moved aside, not deleted, until the new one and `latest` are in place.
      const std::string old_dir = final_dir + ".old";
      fs::remove_all(old_dir);
      const bool replaces = fs::exists(final_dir);
      if (replaces) fs::rename(final_dir, old_dir);
      fs::rename(tmp_dir, final_dir);
      const std::string latest = (fs::path(save_dir) / "latest").string();
      write_text_file(latest + ".tmp", step_name(step) + "\n");
      fs::rename(latest + ".tmp", latest);
      fsync_directory(save_dir);
      fs::remove_all(old_dir);
      // This run saves each step once: the one it replaced was another run's.
      if (replaces)
        log_info("ternion: checkpoint.save_dir '", save_dir, "': ", step_name(step),
                 " held a checkpoint of another run (or of this one before it resumed from an "
                 "older step); replaced by this run's");
      prune_checkpoints(save_dir, step, retention);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!all_succeeded(world, error.empty()))
    TN_THROW(CheckpointError, "checkpoint of step ", step, " not completed: ",
             error.empty() ? "rank 0 failed" : error);
}

std::string resolve_checkpoint(const std::string& load, const std::string& save_dir) {
  if (load != "latest") {
    // A save_dir, as ternion-generate and ternion-export take one: its latest checkpoint.
    if (checkpoint_path_exists(fs::path(load) / "latest") &&
        !checkpoint_path_exists(fs::path(load) / "checkpoint.json"))
      return resolve_checkpoint("latest", load);
    return load;
  }
  const std::string latest = (fs::path(save_dir) / "latest").string();
  std::ifstream in(latest);
  TN_CHECK_AS(CheckpointError, in.good(), "checkpoint.load: latest: no checkpoint in '", save_dir,
              "' (no file '", latest, "')");
  std::string name;
  std::getline(in, name);
  TN_CHECK_AS(CheckpointError, !name.empty(), "'", latest, "' is empty");
  // A save writes a step's directory name there; anything else (a path to another run's
  // checkpoint) is an edit, not this save_dir's latest.
  TN_CHECK_AS(CheckpointError, step_of_name(name) >= 0, "'", latest, "' names '", name,
              "', not a checkpoint of this save_dir (step_NNNNNNN)");
  return (fs::path(save_dir) / name).string();
}

std::string checkpoint_to_resume(const CheckpointConfig& checkpoint) {
  if (checkpoint.load.empty()) return "";
  if (checkpoint.load == "latest" &&
      !checkpoint_path_exists(fs::path(checkpoint.save_dir) / "latest")) {
    log_info("ternion: checkpoint.load: latest: no checkpoint in '", checkpoint.save_dir,
             "' yet: the run starts from the beginning");
    return "";
  }
  // Checked here, where the key is known: a path that is no checkpoint is named as the key's.
  try {
    const std::string dir = resolve_checkpoint(checkpoint.load, checkpoint.save_dir);
    meta_path_of(dir);
    return dir;
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    if (what.rfind("checkpoint.load", 0) == 0) throw;
    TN_THROW(CheckpointError, "checkpoint.load: ", what);
  }
}

namespace {

// CheckpointError unless the checkpoint (`meta`, of `dir`) was saved of the model `model` is
// (all but its vocabulary padding, which loads across: see Repadding) and with this run's
// optimizer (`optimizer_type`; empty: the targets are the model's alone).
void check_saved_model(const CheckpointMeta& meta, const ModelConfig& model,
                       const std::string& optimizer_type, const std::string& dir,
                       const std::string& meta_path) {
  // Another family's parameters: say so, rather than name the first tensor it lacks.
  TN_CHECK_AS(CheckpointError, meta.family == model.family, "checkpoint '", dir,
              "' was saved with model.family = ", meta.family, "; this run has ", model.family);
  for (const auto& size_of_ours : checkpoint_model_sizes(model)) {
    const std::string& key = size_of_ours.first;
    const std::int64_t value = size_of_ours.second;
    const auto saved = std::find_if(meta.model.begin(), meta.model.end(),
                                    [&](const auto& size) { return size.first == key; });
    // n_kv_head was recorded later; checkpoints without it are of plain multi-head models.
    if (saved == meta.model.end() && key == "n_kv_head" && value == model.n_head) continue;
    // tie_embeddings (1 where the LM head is the embedding) too; older ones are not checked.
    if (saved == meta.model.end() && key == "tie_embeddings") continue;
    TN_CHECK_AS(CheckpointError, saved != meta.model.end(), "checkpoint file '", meta_path,
                "': field 'model.", key, "' is missing");
    if (key == "vocab_pad_multiple") continue;
    TN_CHECK_AS(CheckpointError, saved->second == value, "checkpoint '", dir,
                "' was saved with model.", key, " = ", saved->second, "; this run has ", value);
  }
  // Settings that change what the same weights compute: the run would train another model.
  // A setting the checkpoint does not record was saved before it was: it is not checked.
  for (const auto& ours : model_family(model.family).function_settings(model)) {
    const std::string& key = ours.first;
    const double value = ours.second;
    const auto saved = std::find_if(meta.settings.begin(), meta.settings.end(),
                                    [&](const auto& setting) { return setting.first == key; });
    if (saved == meta.settings.end()) continue;
    TN_CHECK_AS(CheckpointError, saved->second == value, "checkpoint '", dir,
                "' was saved with model.", key, " = ", shortest_text(saved->second),
                "; this run has ", shortest_text(value));
  }
  // A block type of other parameters: say so, rather than name the first tensor it lacks.
  TN_CHECK_AS(CheckpointError, meta.block.empty() || meta.block == model.block, "checkpoint '",
              dir, "' was saved with model.block = ", meta.block, "; this run has ", model.block);
  // Optimizer state does not carry over from one optimizer to another (AdamW's moments are
  // not SGD's momentum).
  TN_CHECK_AS(CheckpointError,
              optimizer_type.empty() || meta.optimizer.empty() || meta.optimizer == optimizer_type,
              "checkpoint '", dir, "' was saved with optimizer.type = ", meta.optimizer,
              "; this run has ", optimizer_type, ", whose state it does not hold");
}

// The vocabulary may be padded to another multiple than the checkpoint's (one that another
// tensor-parallel size needs): no token reads a padding row and no padding logit enters the
// loss, so a tensor of the vocabulary's rows loads across it, its padding rows cut back or
// extended with zeros.
struct Repadding {
  std::int64_t saved_rows = 0, our_rows = 0;  // the padded vocabularies

  Repadding(const CheckpointMeta& meta, const ModelConfig& model) {
    ModelConfig saved = model;
    for (const auto& [key, value] : meta.model)
      if (key == "vocab_pad_multiple") saved.vocab_pad_multiple = value;
    saved_rows = saved.padded_vocab_size();
    our_rows = model.padded_vocab_size();
  }
  // Whether a tensor saved as `saved` is ours (`ours`) of the vocabulary's rows, padded as the
  // checkpoint's: only its first dimension differs, so an element's index is the same in both.
  bool relates(const Shape& saved, const Shape& ours) const {
    return saved_rows != our_rows && !ours.empty() && saved.size() == ours.size() &&
           ours[0] == our_rows && saved[0] == saved_rows &&
           std::equal(saved.begin() + 1, saved.end(), ours.begin() + 1);
  }
};

// The pieces of each target, found and counted before any is read, so that a checkpoint of
// another layout's making that lacks part of this one's state is refused with nothing read.
std::vector<const std::vector<LocatedPiece>*> pieces_of_targets(
    const std::map<std::string, std::vector<LocatedPiece>>& pieces,
    const std::vector<ShardedTensor>& targets, const Repadding& repadding,
    const std::string& optimizer_type, const std::string& dir) {
  std::set<std::string> optimizer_kinds;  // "m", "v" of "optim/m/<name>", ...
  for (const auto& [tensor, located] : pieces)
    if (tensor.rfind("optim/", 0) == 0)
      optimizer_kinds.insert(tensor.substr(6, tensor.find('/', 6) - 6));
  std::vector<const std::vector<LocatedPiece>*> sources;
  for (const ShardedTensor& target : targets) {
    const auto found = pieces.find(target.name);
    if (found == pieces.end() && target.name.rfind("optim/", 0) == 0 && !optimizer_kinds.empty()) {
      // A checkpoint that predates recording optimizer.type, of another optimizer.
      const std::string kind = target.name.substr(6, target.name.find('/', 6) - 6);
      if (optimizer_kinds.count(kind) == 0) {
        std::string held;
        for (const std::string& k : optimizer_kinds) held += (held.empty() ? "'" : ", '") + k + "'";
        TN_THROW(CheckpointError, "checkpoint '", dir, "' holds optimizer state ", held, ", not '",
                 kind, "': it was saved with another optimizer.type than this run's ",
                 optimizer_type);
      }
    }
    TN_CHECK_AS(CheckpointError, found != pieces.end(), "checkpoint '", dir, "' has no tensor '",
                target.name, "'");
    const Shape& global_shape = target.param->global_shape;
    const Shape& saved_shape = found->second.front().piece.global_shape;
    // A save writes each element once, so the pieces' sizes add up to the tensor's: an index
    // that holds more (a piece edited in, or left from another save) or fewer is refused.
    std::int64_t held = 0;
    for (const LocatedPiece& located : found->second) {
      const CheckpointPiece& piece = located.piece;
      TN_CHECK_AS(CheckpointError,
                  piece.global_shape == saved_shape &&
                      (saved_shape == global_shape || repadding.relates(saved_shape, global_shape)),
                  "checkpoint '", dir, "': tensor '", target.name, "' is ",
                  shape_str(piece.global_shape), ", this model's is ", shape_str(global_shape));
      held += piece.end - piece.begin;
    }
    TN_CHECK_AS(CheckpointError, held == shape_numel(saved_shape), "checkpoint '", dir,
                "': the pieces of tensor '", target.name, "' hold ", held, " elements, its ",
                shape_str(saved_shape), " has ", shape_numel(saved_shape));
    sources.push_back(&found->second);
  }
  return sources;
}

// Reads pieces' elements, their checksums checked; each file is opened once.
class PieceReader {
 public:
  explicit PieceReader(std::string dir) : dir_(std::move(dir)) {}

  void read(const LocatedPiece& located, const std::string& tensor, float* out) {
    auto file = files_.find(located.file);
    if (file == files_.end())
      file = files_.emplace(located.file, SafetensorsFile::open(located.file)).first;
    const CheckpointPiece& piece = located.piece;
    const SafetensorsEntry* entry = file->second.find(piece.key);
    const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(piece.end - piece.begin);
    // read_into names a piece missing from its file or of another size; one of another type
    // fails the checksum, as a damaged one does.
    const bool intact = (entry == nullptr || entry->dtype == DType::F32) &&
                        file->second.read_into(piece.key, out, bytes) == piece.crc;
    TN_CHECK_AS(CheckpointError, intact, "checkpoint '", dir_, "': piece ", piece.key,
                " of tensor '", tensor, "' in '", located.file, "' fails its checksum");
  }

 private:
  std::string dir_;
  std::map<std::string, SafetensorsFile> files_;
};

// This rank's part of `target` (its elements [begin, end), into `out`) from the pieces of
// another layout's making: the whole tensor is assembled as saved, each element covered once,
// and the rank's part taken from it. A vocabulary padded further than the checkpoint's has its
// extra padding rows zero; one padded less leaves the saved rows past its own unused.
void assemble_rank_part(const ShardedTensor& target, const std::vector<LocatedPiece>& pieces,
                        PieceReader& reader, const std::string& dir, float* out) {
  const Parameter& p = *target.param;
  const Shape& global_shape = p.global_shape;
  const Shape& saved_shape = pieces.front().piece.global_shape;
  const std::int64_t ours = shape_numel(global_shape), saved = shape_numel(saved_shape);
  std::vector<float> whole(static_cast<std::size_t>(std::max(ours, saved)), 0.0f);
  std::vector<char> covered(whole.size(), 0);
  std::fill(covered.begin() + saved, covered.end(), 1);
  std::vector<float> values;
  for (const LocatedPiece& located : pieces) {
    const CheckpointPiece& piece = located.piece;
    values.resize(static_cast<std::size_t>(piece.end - piece.begin));
    reader.read(located, target.name, values.data());
    // read_rank_index checked that the piece lies within its global shape, so its elements'
    // indices are within `whole`, and are ours (Repadding).
    for_each_run(piece.local_shape, saved_shape, piece.shard_dim, piece.shard_offset, piece.begin,
                 piece.end, [&](std::int64_t i, std::int64_t g, std::int64_t n) {
                   const auto twice = std::find(covered.begin() + g, covered.begin() + g + n, 1);
                   TN_CHECK_AS(CheckpointError, twice == covered.begin() + g + n, "checkpoint '",
                               dir, "': tensor '", target.name, "' has element ",
                               twice - covered.begin(), " in two pieces");
                   std::copy_n(values.begin() + (i - piece.begin), n, whole.begin() + g);
                   std::fill_n(covered.begin() + g, n, 1);
                 });
  }
  for_each_run(p.value.shape(), global_shape, p.shard_dim, p.shard_offset, target.begin, target.end,
               [&](std::int64_t i, std::int64_t g, std::int64_t n) {
                 TN_CHECK_AS(CheckpointError,
                             std::find(covered.begin() + g, covered.begin() + g + n, 0) ==
                                 covered.begin() + g + n,
                             "checkpoint '", dir, "' is missing part of tensor '", target.name,
                             "'");
                 std::copy_n(whole.begin() + g, n, out + (i - target.begin));
               });
}

}  // namespace

CheckpointMeta load_checkpoint(const std::string& dir, const ModelConfig& model,
                               const std::string& optimizer_type,
                               std::vector<ShardedTensor>& targets) {
  const std::string meta_path = meta_path_of(dir);
  const CheckpointMeta meta = read_checkpoint_meta(meta_path);
  check_saved_model(meta, model, optimizer_type, dir, meta_path);
  const std::map<std::string, std::vector<LocatedPiece>> pieces = read_pieces(dir, meta.ranks);
  const std::vector<const std::vector<LocatedPiece>*> sources =
      pieces_of_targets(pieces, targets, Repadding(meta, model), optimizer_type, dir);
  PieceReader reader(dir);
  for (std::size_t k = 0; k < targets.size(); ++k) {
    ShardedTensor& target = targets[k];
    const std::vector<LocatedPiece>& located_pieces = *sources[k];
    const Parameter& p = *target.param;
    const std::int64_t count = target.end - target.begin;
    // The elements go straight into the caller's CPU tensor; elsewhere (a GPU's) through a
    // CPU one, a tensor's worth at a time, so a load never holds a second copy of the state.
    const bool in_place = target.data.defined() && target.data.device().is_cpu() &&
                          target.data.is_contiguous() && target.data.dtype() == DType::F32;
    TN_CHECK(!target.data.defined() || target.data.numel() == count, "load target '", target.name,
             "' holds ", target.data.numel(), " elements, not ", count);
    Tensor staging = in_place ? target.data.view({count}) : Tensor::empty({count});
    // Saved by this layout: one piece is this rank's part as it is, with nothing to assemble.
    auto is_ours = [&](const LocatedPiece& located) {
      const CheckpointPiece& piece = located.piece;
      return piece.global_shape == p.global_shape && piece.local_shape == p.value.shape() &&
             piece.shard_dim == p.shard_dim && piece.shard_offset == p.shard_offset &&
             piece.begin == target.begin && piece.end == target.end;
    };
    const auto same = std::find_if(located_pieces.begin(), located_pieces.end(), is_ours);
    if (std::count_if(located_pieces.begin(), located_pieces.end(), is_ours) == 1)
      reader.read(*same, target.name, staging.data<float>());
    else
      assemble_rank_part(target, located_pieces, reader, dir, staging.data<float>());
    if (!target.data.defined())
      target.data = staging;
    else if (!in_place)
      target.data.copy_from(staging.view(target.data.shape()));
  }
  return meta;
}

std::map<std::string, Shape> checkpoint_tensor_shapes(const std::string& dir) {
  std::map<std::string, Shape> shapes;
  for (const auto& [tensor, located] :
       read_pieces(dir, read_checkpoint_meta(meta_path_of(dir)).ranks))
    shapes.emplace(tensor, located.front().piece.global_shape);
  return shapes;
}

namespace {

// The config.yaml of the checkpoint `path` names (a checkpoint directory, or a save_dir with
// a `latest`).
std::string checkpoint_config_path(const std::string& path) {
  const std::string dir =
      checkpoint_path_exists(fs::path(path) / "latest") ? resolve_checkpoint("latest", path) : path;
  const std::string config_path = (fs::path(dir) / "config.yaml").string();
  TN_CHECK_AS(CheckpointError, checkpoint_path_exists(config_path), "'", dir,
              "' is not a checkpoint (no config.yaml)");
  return config_path;
}

}  // namespace

std::string checkpoint_model_key(const std::string& path, const std::string& key,
                                 const std::string& fallback) {
  const std::string config_path = checkpoint_config_path(path);
  try {
    const YAML::Node value = YAML::LoadFile(config_path)["model"][key];
    return value && value.IsScalar() ? value.Scalar() : fallback;
  } catch (const YAML::Exception& e) {
    TN_THROW(CheckpointError, config_path, ": ", e.what());
  }
}

std::string checkpoint_block_type(const std::string& path) {
  return checkpoint_model_key(path, "block", ModelConfig().block);
}

std::unique_ptr<GptModel> load_model_from_checkpoint(const std::string& path, TrainConfig* config) {
  const std::string config_path = checkpoint_config_path(path);
  const std::string dir = fs::path(config_path).parent_path().string();
  // One rank, whatever layout trained it.
  *config = TrainConfig::load(
      config_path, {"parallel.tensor=1", "parallel.pipeline=1", "parallel.data=1",
                    "parallel.virtual_stages=1", "parallel.sequence_parallel=false",
                    "parallel.zero_stage=0", "checkpoint.load=", "logging.trace_file=",
                    "logging.trace_step=0"});
  auto model = std::make_unique<GptModel>(config->model);
  std::vector<ShardedTensor> targets;
  for (Parameter* p : model->parameters())
    targets.push_back({"model/" + p->name, p, p->value.view({-1}), 0, p->value.numel()});
  load_checkpoint(dir, config->model, "", targets);
  return model;
}

Tokenizer checkpoint_tokenizer(const std::string& path, const TrainConfig& config) {
  const std::string& named = config.data.tokenizer;
  if (named.empty()) return Tokenizer::bytes();
  const fs::path dir = fs::path(checkpoint_config_path(path)).parent_path();
  const std::string copy = (dir / "tokenizer.json").string();
  try {
    return Tokenizer(BpeTokenizer::load(copy));
  } catch (const DataError& e) {
    TN_THROW(CheckpointError, "the checkpoint's run used data.tokenizer '", named,
             "', but its copy is unusable: ", e.what());
  }
}

bool checkpoint_path_exists(const fs::path& path) {
  std::error_code ec;
  const bool found = fs::exists(path, ec);
  TN_CHECK_AS(CheckpointError, !ec, "'", path.string(), "': ", ec.message());
  return found;
}

std::vector<std::string> checkpoint_files(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it.depth() > 1) it.disable_recursion_pending();
    std::error_code not_a_file;
    if (it->is_regular_file(not_a_file)) files.push_back(it->path().string());
  }
  return files;
}

}  // namespace ternion
