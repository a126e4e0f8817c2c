// Checkpoints under mpirun (4 ranks): a run saved at step 5 and resumed — under the same or a
// different tensor x pipeline x data (x ZeRO) layout — logs steps 6..10 with the losses of the
// uninterrupted one-rank run; damaged checkpoints are refused; a save that dies leaves the
// last good checkpoint loadable.
#include "training/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "data/builtin_corpus.h"
#include "data/text_prepare.h"
#include "layers/layer_registry.h"
#include "mpi_gtest.h"
#include "parallel/process_groups.h"
#include "parallel_run_support.h"
#include "training/trainer.h"

namespace ternion {
namespace {

namespace fs = std::filesystem;

struct Layout {
  std::int64_t data = 1, tensor = 1, pipeline = 1, zero_stage = 0, virtual_stages = 1;
  bool sequence_parallel = false;
  std::int64_t vocab_pad_multiple = 0;  // 0: the config's
};

// Shared by every rank (rank 0 makes it, and deletes it when the process ends).
const std::string& scratch() {
  static const test::RemovedAtExit dir{[] {
    Tensor id = Tensor::from_vector({static_cast<float>(::getpid() % 1000000)}, {1});
    testing_mpi::world().broadcast(id, 0);
    const std::string d =
        "/tmp/ternion-ckpt-test-" + std::to_string(static_cast<long>(id.data<float>()[0]));
    if (testing_mpi::world().rank() == 0) {
      fs::remove_all(d);
      prepare_text(builtin_corpus_text(60000), d + "/data", {.val_fraction = 0.1});
    }
    testing_mpi::world().barrier();
    return d;
  }(), testing_mpi::world().rank() == 0};
  return dir.path;
}

TrainConfig run_config(const Layout& l, const std::string& save_dir) {
  TrainConfig c = test::small_parallel_run(scratch() + "/data");
  c.parallel.data = l.data;
  c.parallel.tensor = l.tensor;
  c.parallel.pipeline = l.pipeline;
  c.parallel.zero_stage = l.zero_stage;
  c.parallel.virtual_stages = l.virtual_stages;
  c.parallel.sequence_parallel = l.sequence_parallel;
  if (l.vocab_pad_multiple > 0) c.model.vocab_pad_multiple = l.vocab_pad_multiple;
  c.parallel.bucket_size_mb = 0.02;
  c.training.steps = 10;
  c.training.global_batch_size = 8;
  c.data.val.clear();
  c.checkpoint.save_dir = save_dir;
  return c;
}

std::vector<double> reference_losses() {
  static const std::vector<double> losses = [] {
    Trainer t(run_config(Layout{}, ""));
    std::vector<double> out;
    for (int s = 1; s <= 10; ++s) out.push_back(t.train_step(s).loss);
    return out;
  }();
  return losses;
}

struct Job {
  std::unique_ptr<ProcessGroups> groups;
  std::unique_ptr<Trainer> trainer;
};

// The layout on all ranks, or (a 1-rank layout) on rank 0 alone, which returns an empty job
// elsewhere.
// `config` is run_config(l, save_dir) unless given.
Job make_job(const Layout& l, const std::string& save_dir,
             std::optional<TrainConfig> config = std::nullopt) {
  if (!config) config = run_config(l, save_dir);
  Communicator& world = testing_mpi::world();
  Job job;
  const std::int64_t ranks = l.data * l.tensor * l.pipeline;
  if (ranks == 1) {
    if (world.rank() == 0) job.trainer = std::make_unique<Trainer>(*config);
    return job;
  }
  job.groups = std::make_unique<ProcessGroups>(
      world, make_rank_layout(world.size(), l.tensor, l.pipeline, l.data));
  job.trainer = std::make_unique<Trainer>(*config, job.groups.get());
  return job;
}

void save_then_resume(const Layout& saved, const Layout& resumed, const std::string& name) {
  const std::string dir = scratch() + "/" + name;
  const std::vector<double> want = reference_losses();
  {
    Job job = make_job(saved, dir);
    if (job.trainer) {
      for (int s = 1; s <= 5; ++s) job.trainer->train_step(s);
      job.trainer->save_checkpoint(5);
    }
  }
  testing_mpi::world().barrier();
  Job job = make_job(resumed, dir);
  if (job.trainer) {
    EXPECT_EQ(job.trainer->load_checkpoint(resolve_checkpoint("latest", dir)), 5);
    for (int s = 6; s <= 10; ++s)
      EXPECT_NEAR(job.trainer->train_step(s).loss, want[s - 1], 1e-5 * want[s - 1])
          << name << " step " << s;
  }
  testing_mpi::world().barrier();
}

bool four_ranks() { return testing_mpi::world().size() == 4; }

TEST(Checkpoint, OneRankToTensor2Pipeline2) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{}, Layout{1, 2, 2}, "one_to_tp2pp2");
}
TEST(Checkpoint, Tensor2Pipeline2ToOneRank) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{1, 2, 2}, Layout{}, "tp2pp2_to_one");
}
TEST(Checkpoint, Data2Tensor2Zero1ToPipeline2Data2) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{2, 2, 1, 1}, Layout{2, 1, 2, 0}, "dp2tp2zero_to_pp2dp2");
}
TEST(Checkpoint, Pipeline2Data2ToData4Zero1) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{2, 1, 2, 0}, Layout{4, 1, 1, 1}, "pp2dp2_to_dp4zero");
}

TEST(Checkpoint, Data2Pipeline2Zero2ToData4Zero1) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{2, 1, 2, 2}, Layout{4, 1, 1, 1}, "dp2pp2zero2_to_dp4zero1");
}
TEST(Checkpoint, Data4Zero1ToData2Tensor2Zero2) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{4, 1, 1, 1}, Layout{2, 2, 1, 2}, "dp4zero1_to_dp2tp2zero2");
}

TEST(Checkpoint, InterleavedSequenceParallelToOneRank) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{1, 2, 2, 0, 2, true}, Layout{}, "tp2pp2v2sp_to_one");
}
TEST(Checkpoint, OneRankToInterleavedSequenceParallel) {
  if (!four_ranks()) GTEST_SKIP();
  save_then_resume(Layout{}, Layout{1, 2, 2, 0, 2, true}, "one_to_tp2pp2v2sp");
}

// A checkpoint loads under another model.vocab_pad_multiple (one that a tensor size such as
// 3 needs), its padding rows extended with zeros or cut back: no token reads them and no logit
// of theirs enters the loss, so the run goes on as the uninterrupted one.
TEST(Checkpoint, AnotherVocabularyPaddingLoads) {
  if (!four_ranks()) GTEST_SKIP();
  ASSERT_NE(run_config(Layout{}, "").model.padded_vocab_size(),
            run_config(Layout{.vocab_pad_multiple = 96}, "").model.padded_vocab_size());
  save_then_resume(Layout{},
                   Layout{.data = 2, .tensor = 2, .zero_stage = 1, .vocab_pad_multiple = 96},
                   "pad64_to_pad96_dp2tp2zero1");
  save_then_resume(Layout{.tensor = 2, .pipeline = 2, .vocab_pad_multiple = 96}, Layout{},
                   "pad96_tp2pp2_to_pad64");
}

// PowerSGD's error feedback and Q are part of the state: a run resumed in its own layout logs
// the uninterrupted run's losses and gradient norms, whether it was saved before compression
// started (its warm-up counts the steps already run) or after. Another PowerSGD rank starts
// them afresh (and says so) rather than misreading them.
TEST(Checkpoint, PowerSgdResumesExactlyInItsOwnLayout) {
  if (!four_ranks()) GTEST_SKIP();
  const Layout layout{2, 1, 2};
  for (const std::int64_t start_step : {0, 7}) {
    const std::string dir = scratch() + "/powersgd_from_" + std::to_string(start_step);
    TrainConfig c = run_config(layout, dir);
    c.parallel.grad_compression = "powersgd";
    c.parallel.powersgd_rank = 1;
    c.parallel.powersgd_start_step = start_step;
    std::vector<StepMetrics> want;
    {
      Job job = make_job(layout, dir, c);
      for (int s = 1; s <= 10; ++s) {
        want.push_back(job.trainer->train_step(s));
        if (s == 5) job.trainer->save_checkpoint(5);
      }
    }
    testing_mpi::world().barrier();
    const std::string saved = dir + "/step_0000005";
    {
      Job job = make_job(layout, dir, c);
      EXPECT_EQ(job.trainer->load_checkpoint(saved), 5);
      for (int s = 6; s <= 10; ++s) {
        const StepMetrics got = job.trainer->train_step(s);
        EXPECT_EQ(got.loss, want[s - 1].loss) << "from step " << start_step << ", step " << s;
        EXPECT_EQ(got.grad_norm, want[s - 1].grad_norm)
            << "from step " << start_step << ", step " << s;
      }
    }
    testing_mpi::world().barrier();
    TrainConfig rank2 = c;
    rank2.parallel.powersgd_rank = 2;
    Job job = make_job(layout, dir, rank2);
    EXPECT_EQ(job.trainer->load_checkpoint(saved), 5);
    EXPECT_TRUE(std::isfinite(job.trainer->train_step(6).loss));
    testing_mpi::world().barrier();
  }
}

// PowerSGD's state is each rank's whole, not parameter-shaped: under another vocabulary padding
// a tensor rank's rows of the embedding are others, so it starts afresh rather than fail to
// load or misread them.
TEST(Checkpoint, PowerSgdStartsAfreshUnderAnotherVocabularyPadding) {
  if (!four_ranks()) GTEST_SKIP();
  const Layout layout{2, 2, 1};
  const std::string dir = scratch() + "/powersgd_padding";
  TrainConfig c = run_config(layout, dir);
  c.parallel.grad_compression = "powersgd";
  c.parallel.powersgd_rank = 1;
  c.parallel.powersgd_start_step = 0;
  {
    Job job = make_job(layout, dir, c);
    for (int s = 1; s <= 3; ++s) job.trainer->train_step(s);
    job.trainer->save_checkpoint(3);
  }
  testing_mpi::world().barrier();
  TrainConfig padded = c;
  padded.model.vocab_pad_multiple = 96;
  ASSERT_NE(padded.model.padded_vocab_size(), c.model.padded_vocab_size());
  Job job = make_job(layout, dir, padded);
  EXPECT_EQ(job.trainer->load_checkpoint(dir + "/step_0000003"), 3);
  EXPECT_TRUE(std::isfinite(job.trainer->train_step(4).loss));
  testing_mpi::world().barrier();
}

// The rest on rank 0 alone.
class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing_mpi::world().rank() != 0) GTEST_SKIP();
    dir_ = scratch() + "/files";
    fs::remove_all(dir_);
    trainer_ = std::make_unique<Trainer>(run_config(Layout{}, dir_));
    for (int s = 1; s <= 2; ++s) trainer_->train_step(s);
    trainer_->save_checkpoint(2);
    step_ = dir_ + "/step_0000002";
  }
  std::string load_error(const std::string& dir) {
    return load_error(dir, run_config(Layout{}, dir_));
  }
  std::string load_error(const std::string& dir, const TrainConfig& config) {
    try {
      Trainer t(config);
      t.load_checkpoint(dir);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "";
  }
  // A copy of checkpoint `from` (the fixture's by default), named `name`, with the first match
  // of `pattern` in its `file` replaced by `replacement` (ECMAScript regex and format).
  std::string damaged_copy(const std::string& name, const std::string& file,
                           const std::string& pattern, const std::string& replacement,
                           const std::string& from = "") {
    const std::string copy = dir_ + "/" + name;
    fs::remove_all(copy);
    fs::copy(from.empty() ? step_ : from, copy);
    const std::string path = copy + "/" + file;
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    const std::string edited = std::regex_replace(text.str(), std::regex(pattern), replacement,
                                                  std::regex_constants::format_first_only);
    EXPECT_NE(edited, text.str()) << "/" << pattern << "/ not found in " << path;
    std::ofstream(path, std::ios::trunc) << edited;
    return copy;
  }
  std::string latest_name() {
    std::ifstream latest(dir_ + "/latest");
    std::string name;
    std::getline(latest, name);
    return name;
  }
  std::string dir_, step_;
  std::unique_ptr<Trainer> trainer_;
};

TEST_F(CheckpointFiles, LayoutOnDisk) {
  for (const char* f :
       {"checkpoint.json", "config.yaml", "rank_00000.json", "rank_00000.safetensors"})
    EXPECT_TRUE(fs::exists(step_ + "/" + f)) << f;
  EXPECT_EQ(latest_name(), "step_0000002");
  EXPECT_EQ(load_error(step_), "");
}

// A CPU target is loaded in place, so a resume holds no second copy of the state; an
// undefined one gets a tensor of its own. All hold the saved values.
TEST_F(CheckpointFiles, ALoadFillsTheTargetsOwnTensors) {
  const TrainConfig config = run_config(Layout{}, dir_);
  const std::vector<Parameter*>& saved = trainer_->parameters();
  ASSERT_GE(saved.size(), 2u);
  std::vector<ShardedTensor> targets;
  for (const Parameter* p : saved)
    targets.push_back({"model/" + p->name, p, Tensor(), 0, p->value.numel()});
  Tensor place = Tensor::zeros({saved[0]->value.numel()});
  targets[0].data = place;
  // A strided target (as a GPU's, not read into) is filled through a CPU tensor.
  const Tensor wide = Tensor::zeros({saved[1]->value.numel(), 2});
  targets[1].data = wide.slice(1, 1, 1);
  load_checkpoint(step_, config.model, "", targets);
  EXPECT_TRUE(targets[0].data.same_start_as(place));
  EXPECT_TRUE(targets[1].data.shares_storage_with(wide));
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const Tensor expected = saved[i]->value.contiguous().view({-1});
    const Tensor got = targets[i].data.contiguous().view({-1});
    ASSERT_EQ(got.numel(), expected.numel()) << saved[i]->name;
    EXPECT_EQ(std::memcmp(got.raw_data(), expected.raw_data(), expected.nbytes()), 0)
        << saved[i]->name;
  }
}

TEST_F(CheckpointFiles, CorruptedDataIsRefusedByItsChecksum) {
  const std::string file = step_ + "/rank_00000.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  const std::string msg = load_error(step_);
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
}

TEST_F(CheckpointFiles, MissingPiecesAndOtherModelsAreRefused) {
  fs::remove(step_ + "/rank_00000.json");
  EXPECT_NE(load_error(step_).find("missing 'rank_00000.json'"), std::string::npos);
  fs::create_directory(step_ + "/rank_00000.json");
  EXPECT_NE(load_error(step_).find("rank_00000.json': is a directory"), std::string::npos)
      << load_error(step_);
  fs::remove(step_ + "/rank_00000.json");
  EXPECT_NE(load_error(dir_ + "/step_0000099").find("checkpoint '" + dir_ +
                                                    "/step_0000099' does not exist"),
            std::string::npos);
  fs::create_directory(dir_ + "/step_0000099");
  EXPECT_NE(load_error(dir_ + "/step_0000099").find("not a complete checkpoint"),
            std::string::npos);
  fs::remove(dir_ + "/step_0000099");
  trainer_->save_checkpoint(3);
  TrainConfig other = run_config(Layout{}, dir_);
  other.model.d_model = 64;
  Trainer t(other);
  try {
    t.load_checkpoint(dir_ + "/step_0000003");
    FAIL() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("model.d_model = 32; this run has 64"), std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointFiles, ASaveThatDiesLeavesTheLastCheckpointLoadable) {
  // A crash mid-save leaves a temporary directory with half its files...
  fs::create_directories(dir_ + "/step_0000003.tmp");
  std::ofstream(dir_ + "/step_0000003.tmp/rank_00000.safetensors") << "partial";
  EXPECT_EQ(resolve_checkpoint("latest", dir_), step_);
  EXPECT_EQ(load_error(resolve_checkpoint("latest", dir_)), "");
  // ...and a save that fails (here: its directory cannot be made) changes nothing.
  fs::remove_all(dir_ + "/step_0000004.tmp");
  std::ofstream(dir_ + "/step_0000004.tmp") << "a file where the directory should go";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  bool refused = false;
  try {
    trainer_->save_checkpoint(4);
  } catch (const CheckpointError&) {
    refused = true;
  }
  fs::permissions(dir_, fs::perms::owner_all);
  EXPECT_TRUE(refused || ::geteuid() == 0);  // root ignores the permission bits
  EXPECT_EQ(resolve_checkpoint("latest", dir_), refused ? step_ : dir_ + "/step_0000004");
}

// 'latest' names a step of its own save_dir: a path there (to another run's checkpoint) is an
// edit, refused rather than followed.
TEST_F(CheckpointFiles, LatestNamesAStepOfItsOwnSaveDir) {
  std::ofstream(dir_ + "/latest") << "../elsewhere/step_0000002\n";
  try {
    resolve_checkpoint("latest", dir_);
    ADD_FAILURE() << "a path in 'latest' was followed";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("latest' names '../elsewhere/step_0000002', not a "
                                         "checkpoint of this save_dir (step_NNNNNNN)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointFiles, OnlyTheNewestAreKept) {
  for (int s = 3; s <= 6; ++s) trainer_->save_checkpoint(s);  // keep = 3
  EXPECT_FALSE(fs::exists(dir_ + "/step_0000003"));
  for (const char* kept : {"/step_0000004", "/step_0000005", "/step_0000006"})
    EXPECT_TRUE(fs::exists(dir_ + kept)) << kept;
}

// Each damage is one edit of an index; the loader must refuse it with a CheckpointError that
// names the file and the field, where it used to crash (a shard offset or an empty extent used
// as an index, a missing or mistyped field) or to train from a negative step.
TEST_F(CheckpointFiles, DamagedIndexesAreRefusedNamingTheFileAndField) {
  struct Damage {
    const char* file;
    const char* pattern;
    const char* replacement;
    const char* message;
  };
  const Damage damages[] = {
      {"rank_00000.json", R"("shard_dim":-1,"shard_offset":0)",
       R"("shard_dim":0,"shard_offset":100000)",
       "rank_00000.json': field 'pieces[0].shard_offset' 100000 + local_shape[0] = 256 runs past "
       "global_shape[0] = 256"},
      {"rank_00000.json", R"("local_shape":\[\d+)", R"("local_shape":[0)",
       "rank_00000.json': field 'pieces[0].local_shape[0]' must be at least 1, got 0"},
      {"rank_00000.json", R"("local_shape":\[(\d+),\d+\])", R"("local_shape":[$1, 7])",
       "rank_00000.json': field 'pieces[0].local_shape' [256, 7] differs from global_shape"},
      {"rank_00000.json", R"("shard_dim":-1)", R"("shard_dim":2)",
       "rank_00000.json': field 'pieces[0].shard_dim' must be from -1 to 1, got 2"},
      {"rank_00000.json", R"("end":\d+)", R"("end":99999999)",
       "rank_00000.json': field 'pieces[0].end' must be from 0 to 8192, got 99999999"},
      {"rank_00000.json", R"("crc32":\d+)", R"("crc32":"abc")",
       "rank_00000.json': field 'pieces[0].crc32' must be an integer, got 'abc'"},
      {"rank_00000.json", R"("tensor":"[^"]*",)", "",
       "rank_00000.json': field 'pieces[0].tensor' is missing"},
      {"rank_00000.json", R"("pieces":\[)", R"("pieces":5,"was":[)",
       "rank_00000.json': field 'pieces' must be a list, got '5'"},
      {"rank_00000.json", R"("rank":0)", R"("rank":3)",
       "rank_00000.json': field 'rank' is 3 in the index of rank 0"},
      {"rank_00000.json", R"("rank":0,)", "", "rank_00000.json': field 'rank' is missing"},
      {"checkpoint.json", R"("step":\d+,)", "", "checkpoint.json': field 'step' is missing"},
      {"checkpoint.json", R"("step":\d+)", R"("step":-3)",
       "checkpoint.json': field 'step' must be non-negative, got -3"},
      {"checkpoint.json", R"("step":\d+)", R"("step":2.5)",
       "checkpoint.json': field 'step' must be an integer, got '2.5'"},
      {"checkpoint.json", R"("updates":\d+)", R"("updates":99999)",
       "checkpoint.json': field 'updates' must be from 0 to "},
      {"checkpoint.json", R"("model":\{[^}]*\})", R"("model":3)",
       "checkpoint.json': field 'model' must be a JSON object, got '3'"},
      {"checkpoint.json", R"("d_model":\d+)", R"("d_model":[32])",
       "checkpoint.json': field 'model.d_model' must be an integer, got a list"},
      {"checkpoint.json", R"("n_head":\d+,)", "",
       "checkpoint.json': field 'model.n_head' is missing"},
      {"checkpoint.json", R"("vocab_pad_multiple":\d+)", R"("vocab_pad_multiple":0)",
       "checkpoint.json': field 'model.vocab_pad_multiple' must be at least 1, got 0"},
      {"checkpoint.json", R"("ranks":\d+)", R"("ranks":0)",
       "checkpoint.json': field 'ranks' must be from 1 to"},
      {"checkpoint.json", R"(\}\}\s*$)", "}", "checkpoint.json' is not valid JSON"},
  };
  int i = 0;
  for (const Damage& d : damages) {
    const std::string copy =
        damaged_copy("damaged_" + std::to_string(i++), d.file, d.pattern, d.replacement);
    const std::string msg = load_error(copy);
    EXPECT_NE(msg.find(copy + "/" + d.message), std::string::npos)
        << "damage /" << d.pattern << "/ -> " << d.replacement << ": got '" << msg << "'";
  }
}

// An index with a piece too many for a tensor (the same elements twice): refused, naming the
// tensor, rather than loaded from whichever piece came last, or from the one that matches this
// rank's part exactly while another overlaps it.
TEST_F(CheckpointFiles, APieceTooManyIsRefused) {
  const std::string twice = damaged_copy("piece_twice", "rank_00000.json",
                                         R"((\{"tensor":"model/wte"[^}]*\}))", "$1,\n  $1");
  std::string msg = load_error(twice);
  EXPECT_NE(msg.find("checkpoint '" + twice + "': the pieces of tensor 'model/wte' hold 16384 "
                     "elements, its [256, 32] has 8192"),
            std::string::npos) << msg;
  // The first of the two now holds half the tensor: the second is this rank's part exactly.
  const std::string overlap = damaged_copy("piece_overlaps", "rank_00000.json",
                                           R"("end":8192,)", R"("end":4096,)", twice);
  msg = load_error(overlap);
  EXPECT_NE(msg.find("checkpoint '" + overlap + "': the pieces of tensor 'model/wte' hold 12288 "
                     "elements, its [256, 32] has 8192"),
            std::string::npos) << msg;
}

TEST_F(CheckpointFiles, AnotherOptimizersStateIsRefusedNamingBothTypes) {
  TrainConfig sgd = run_config(Layout{}, dir_);
  sgd.optimizer.type = "sgd";
  std::string msg = load_error(step_, sgd);
  EXPECT_NE(msg.find("was saved with optimizer.type = adamw; this run has sgd"), std::string::npos)
      << msg;
  // Checkpoints written before the updates were counted load too (as many as steps).
  EXPECT_EQ(load_error(damaged_copy("before_updates", "checkpoint.json", R"("updates":\d+,)", "")),
            "");
  // Checkpoints written before the type was recorded still load, and another optimizer's
  // state is told apart by its kinds.
  const std::string old = damaged_copy("before_optimizer_type", "checkpoint.json",
                                       R"("optimizer":"adamw",)", "");
  EXPECT_EQ(load_error(old), "");
  msg = load_error(old, sgd);
  EXPECT_NE(msg.find("holds optimizer state 'm', 'v', not 'momentum': it was saved with another "
                     "optimizer.type than this run's sgd"),
            std::string::npos)
      << msg;
}

// A checkpoint of another block type: the message names both types, not the first tensor the
// other block lacks. "transformer_twin" is the built-in block under another name, so the
// recorded name is the only thing that tells the two apart.
TEST_F(CheckpointFiles, AnotherBlockTypeIsRefusedNamingBothTypes) {
  LayerRegistry::instance().add("transformer_twin", [](const BlockSpec& spec) {
    return LayerRegistry::instance().create("transformer", spec);
  });
  TrainConfig twin = run_config(Layout{}, dir_);
  twin.model.block = "transformer_twin";
  std::string msg = load_error(step_, twin);
  EXPECT_NE(msg.find("was saved with model.block = transformer; this run has transformer_twin"),
            std::string::npos)
      << msg;
  // Checkpoints written before the block type was recorded still load.
  const std::string old = damaged_copy("before_block_type", "checkpoint.json",
                                       R"("block":"transformer",)", "");
  EXPECT_EQ(load_error(old), "");
  EXPECT_EQ(load_error(old, twin), "");
}

// A Llama head tied to the embedding has no lm_head tensor; an untied one has its own. Either
// way round the message names the key, rather than ignoring the checkpoint's trained head or
// naming the tensor the other model lacks.
TEST_F(CheckpointFiles, AnotherHeadTyingIsRefusedNamingTheKey) {
  TrainConfig untied = run_config(Layout{}, dir_ + "/llama");
  untied.model.family = "llama";
  Trainer(untied).save_checkpoint(1);
  TrainConfig tied = untied;
  tied.model.tie_embeddings = true;
  const std::string untied_step = dir_ + "/llama/step_0000001";
  std::string msg = load_error(untied_step, tied);
  EXPECT_NE(msg.find("was saved with model.tie_embeddings = 0; this run has 1"),
            std::string::npos) << msg;
  Trainer(tied).save_checkpoint(2);
  msg = load_error(dir_ + "/llama/step_0000002", untied);
  EXPECT_NE(msg.find("was saved with model.tie_embeddings = 1; this run has 0"),
            std::string::npos) << msg;
  // Checkpoints written before tying was recorded still load into the model they hold.
  const std::string old = damaged_copy("before_tie_embeddings", "checkpoint.json",
                                       R"(,"tie_embeddings":0)", "", untied_step);
  EXPECT_EQ(load_error(old, untied), "");
}

// The same weights under another rotary base, norm epsilon or rotary scaling compute another
// function: a resume that changed one would train another model, so each is refused by name.
TEST_F(CheckpointFiles, AnotherFunctionSettingIsRefusedNamingTheKey) {
  TrainConfig llama = run_config(Layout{}, dir_ + "/llama_settings");
  llama.model.family = "llama";
  Trainer(llama).save_checkpoint(1);
  const std::string step = dir_ + "/llama_settings/step_0000001";
  EXPECT_EQ(load_error(step, llama), "");
  TrainConfig other = llama;
  other.model.rope_theta = 500000;
  std::string msg = load_error(step, other);
  EXPECT_NE(msg.find("was saved with model.rope_theta = 10000; this run has 500000"),
            std::string::npos) << msg;
  other = llama;
  other.model.norm_eps = 1e-6;
  msg = load_error(step, other);
  EXPECT_NE(msg.find("was saved with model.norm_eps = 0.00001; this run has 0.000001"),
            std::string::npos) << msg;
  other = llama;
  other.model.rope_scaling_factor = 8;
  msg = load_error(step, other);
  EXPECT_NE(msg.find("was saved with model.rope_scaling_factor = 0; this run has 8"),
            std::string::npos) << msg;
  // Checkpoints written before the settings were recorded still load.
  const std::string old = damaged_copy("before_model_settings", "checkpoint.json",
                                       R"(,"model_settings":\{[^}]*\})", "", step);
  EXPECT_EQ(load_error(old, other), "");
}

// Another run left checkpoints of later steps (5, 10) in the save_dir. A fresh run with keep 2
// keeps its own two saves, `latest` names the newest, and the later steps stay.
TEST_F(CheckpointFiles, AFreshRunKeepsItsOwnSavesAndLeavesLaterSteps) {
  trainer_->save_checkpoint(5);
  trainer_->save_checkpoint(10);
  TrainConfig c = run_config(Layout{}, dir_);
  c.checkpoint.keep = 2;
  Trainer fresh(c);
  fresh.save_checkpoint(3);
  fresh.save_checkpoint(4);
  EXPECT_FALSE(fs::exists(dir_ + "/step_0000002"));
  for (const char* kept : {"/step_0000003", "/step_0000004", "/step_0000005", "/step_0000010"})
    EXPECT_TRUE(fs::exists(dir_ + kept)) << kept;
  EXPECT_EQ(latest_name(), "step_0000004");
  EXPECT_EQ(load_error(resolve_checkpoint("latest", dir_)), "");
}

// Resumed from step 5 with keep 1: the new save replaces the loaded one; step 10 (the abandoned
// trajectory's) stays.
TEST_F(CheckpointFiles, AResumedRunKeepsItsSaveOverAnAbandonedLaterStep) {
  trainer_->save_checkpoint(5);
  trainer_->save_checkpoint(10);
  TrainConfig c = run_config(Layout{}, dir_);
  c.checkpoint.keep = 1;
  Trainer resumed(c);
  EXPECT_EQ(resumed.load_checkpoint(dir_ + "/step_0000005"), 5);
  resumed.train_step(6);
  resumed.save_checkpoint(6);
  for (const char* gone : {"/step_0000002", "/step_0000005"})
    EXPECT_FALSE(fs::exists(dir_ + gone)) << gone;
  for (const char* kept : {"/step_0000006", "/step_0000010"})
    EXPECT_TRUE(fs::exists(dir_ + kept)) << kept;
  EXPECT_EQ(latest_name(), "step_0000006");
  EXPECT_EQ(load_error(resolve_checkpoint("latest", dir_)), "");
}

// Resumed from step 2, a run saves step 5 again: the abandoned run's step 5 is replaced (this
// run's own trajectory is the one `latest` must name), and the log says so.
TEST_F(CheckpointFiles, ReplacingAnotherRunsStepIsLogged) {
  trainer_->save_checkpoint(5);
  Trainer resumed(run_config(Layout{}, dir_));
  EXPECT_EQ(resumed.load_checkpoint(step_), 2);
  testing::internal::CaptureStdout();
  resumed.save_checkpoint(5);
  const std::string log = testing::internal::GetCapturedStdout();
  EXPECT_NE(log.find("step_0000005 held a checkpoint of another run"), std::string::npos) << log;
  testing::internal::CaptureStdout();
  resumed.save_checkpoint(6);
  const std::string quiet = testing::internal::GetCapturedStdout();
  EXPECT_EQ(quiet.find("held a checkpoint"), std::string::npos) << quiet;
}

// Directory names are compared by their steps: step_10000000 (eight digits) is newer than
// step_9999999, though it sorts before it as text.
TEST_F(CheckpointFiles, PruningComparesStepsAsNumbers) {
  TrainConfig c = run_config(Layout{}, dir_);
  c.checkpoint.keep = 1;
  Trainer t(c);
  t.save_checkpoint(9999999);
  t.save_checkpoint(10000000);
  EXPECT_FALSE(fs::exists(dir_ + "/step_9999999"));
  EXPECT_TRUE(fs::exists(dir_ + "/step_10000000"));
  EXPECT_EQ(latest_name(), "step_10000000");
}

}  // namespace
}  // namespace ternion
