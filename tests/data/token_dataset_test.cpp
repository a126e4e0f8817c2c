// TokenDataset and the sampler across shards: what a spec names, the refusals, and windows
// numbered across shards against a concatenation written out by hand.
#include "data/token_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "data/batch_sampler.h"
#include "data_test_support.h"
#include "framework/philox.h"

namespace ternion {
namespace {

using test::TempDir;
using test::write_counting;

std::vector<std::string> paths_of(const TokenDataset& data) {
  std::vector<std::string> paths;
  for (const TokenShard& shard : data.shards()) paths.push_back(shard.path());
  return paths;
}

TEST(TokenDataset, FileDirectoryAndGlob) {
  TempDir dir;
  write_counting(dir, "train_000001.bin", 50, 1000);
  write_counting(dir, "train_000000.bin", 40, 0);
  write_counting(dir, "val_000000.bin", 30, 5000);
  test::write_raw_file(dir.file("notes.txt"), "not a shard");

  const TokenDataset one = TokenDataset::open("data.train", dir.file("train_000000.bin"));
  EXPECT_EQ(paths_of(one), std::vector<std::string>{dir.file("train_000000.bin")});
  EXPECT_EQ(one.token_count(), 40);

  const TokenDataset globbed = TokenDataset::open("data.train", dir.file("train_*.bin"));
  EXPECT_EQ(paths_of(globbed), (std::vector<std::string>{dir.file("train_000000.bin"),
                                                        dir.file("train_000001.bin")}));
  EXPECT_EQ(globbed.token_count(), 90);
  EXPECT_EQ(globbed.max_token(), 1049u);

  // A directory of one split's files: all of them; of both splits: refused, as they would mix.
  std::filesystem::create_directory(dir.file("val"));
  write_counting(dir, "val/b.bin", 30, 0);
  write_counting(dir, "val/a.bin", 30, 0);
  const TokenDataset all = TokenDataset::open("data.val", dir.file("val"));
  EXPECT_EQ(paths_of(all), (std::vector<std::string>{dir.file("val/a.bin"),
                                                    dir.file("val/b.bin")}));
  test::expect_error<DataError>("both splits", [&] { TokenDataset::open("data.val", dir.path()); },
                                {"data.val", "holds both training", dir.file("val*.bin")});
  // So is a glob that matches both.
  write_counting(dir, "val_000000.bin", 30, 0);
  test::expect_error<DataError>(
      "a glob of both splits", [&] { TokenDataset::open("data.train", dir.file("*.bin")); },
      {"data.train", "matches both training", dir.file("train*.bin")});
  EXPECT_EQ(TokenDataset::open("data.train", dir.file("train*.bin")).shards().size(), 2u)
      << "the suggested glob";
}

// llm.c names its splits tinyshakespeare_train.bin and fineweb_val_000000.bin: a directory of
// both is refused as ternion-prepare's is, suggesting a glob that takes one split.
TEST(TokenDataset, LlmcNamedSplitsDoNotMix) {
  TempDir dir;
  write_counting(dir, "tinyshakespeare_train.bin", 40, 0);
  write_counting(dir, "tinyshakespeare_val.bin", 40, 0);
  write_counting(dir, "interval.bin", 40, 0);  // "val" inside a word: no split
  test::expect_error<DataError>(
      "llm.c's splits", [&] { TokenDataset::open("data.train", dir.path()); },
      {"data.train", "holds both training", dir.file("*train*.bin")});
  EXPECT_EQ(paths_of(TokenDataset::open("data.train", dir.file("*train*.bin"))),
            std::vector<std::string>{dir.file("tinyshakespeare_train.bin")});
  std::filesystem::remove(dir.file("tinyshakespeare_val.bin"));
  EXPECT_EQ(TokenDataset::open("data.train", dir.path()).shards().size(), 2u);
}

// Validation text that is also training text measures nothing: the same file, under any name.
TEST(TokenDataset, ValidationSharingATrainingFileIsRefused) {
  TempDir dir;
  write_counting(dir, "train_000000.bin", 40, 0);
  write_counting(dir, "train_000001.bin", 40, 0);
  write_counting(dir, "val.bin", 40, 0);
  const TokenDataset train = TokenDataset::open("data.train", dir.file("train_*.bin"));
  EXPECT_NO_THROW(refuse_shared_shards(train, TokenDataset::open("data.val", dir.file("val.bin"))));
  std::filesystem::create_symlink(dir.file("train_000001.bin"), dir.file("link.bin"));
  for (const char* name : {"train_000001.bin", "link.bin"})
    test::expect_error<DataError>(
        name,
        [&] { refuse_shared_shards(train, TokenDataset::open("data.val", dir.file(name))); },
        {"data.val '", std::string(name) + "' is also a file of data.train '", "train_000001.bin",
         "validation would measure text the model trains on"});
}

TEST(TokenDataset, Refusals) {
  TempDir dir;
  write_counting(dir, "wide.bin", 40, 70000);
  write_token_file(dir.file("narrow.bin"), std::vector<std::uint16_t>(40, 7));
  std::filesystem::create_directory(dir.file("empty"));
  std::filesystem::create_directory(dir.file("bad"));
  test::write_raw_file(dir.file("bad/broken.bin"), "short");

  test::expect_error<DataError>("no match",
                                [&] { TokenDataset::open("data.train", dir.file("x_*.bin")); },
                                {"data.train", "x_*.bin", "matches no file"});
  test::expect_error<DataError>("empty directory",
                                [&] { TokenDataset::open("data.val", dir.file("empty")); },
                                {"data.val", "without token files"});
  test::expect_error<DataError>("missing file",
                                [&] { TokenDataset::open("data.train", dir.file("gone.bin")); },
                                {"data.train", "gone.bin", "cannot open"});
  test::expect_error<DataError>("broken shard",
                                [&] { TokenDataset::open("data.train", dir.file("bad")); },
                                {"data.train", "broken.bin", "shorter than the"});
  test::expect_error<DataError>("mixed widths",
                                [&] { TokenDataset::open("data.train", dir.file("*.bin")); },
                                {"data.train", "narrow.bin", "wide.bin", "uint16", "uint32",
                                 "different tokenizers"});
  test::expect_error<DataError>("empty spec", [&] { TokenDataset::open("data.train", ""); },
                                {"data.train is empty"});
}

// The dataset of shards A (40 tokens), B (50) and C (30) samples as the hand-written numbering
// says: start j < 40 - L is in A, the next 50 - L in B, then C.
TEST(TokenDataset, SamplerNumbersWindowsAcrossShards) {
  TempDir dir;
  write_counting(dir, "a.bin", 40, 0);
  write_counting(dir, "b.bin", 50, 1000);
  write_counting(dir, "c.bin", 30, 2000);
  const TokenDataset data = TokenDataset::open("data.train", dir.path());
  const std::int64_t seq_len = 8;
  const BatchSampler sampler(data, seq_len, 17, "data.train");

  struct Shard {
    std::int64_t size, base;
  };
  const std::vector<Shard> shards{{40, 0}, {50, 1000}, {30, 2000}};
  auto first_token_of_start = [&](std::int64_t start) {
    for (const Shard& s : shards) {
      if (start < s.size - seq_len) return s.base + start;
      start -= s.size - seq_len;
    }
    ADD_FAILURE() << "start past the end";
    return std::int64_t{-1};
  };
  std::set<std::int64_t> shards_seen;
  for (std::int64_t step = 1; step <= 20; ++step) {
    const TokenBatch batch = sampler.sample(step, 0, 8);
    for (std::int64_t g = 0; g < 8; ++g) {
      const std::int64_t start = sampler.sample_offset(step, g);
      ASSERT_LT(start, 32 + 42 + 22);
      const std::int64_t first = first_token_of_start(start);
      const std::int32_t* in = batch.inputs.data<std::int32_t>() + g * seq_len;
      const std::int32_t* target = batch.targets.data<std::int32_t>() + g * seq_len;
      for (std::int64_t t = 0; t < seq_len; ++t) {
        ASSERT_EQ(in[t], first + t) << "step " << step << " sequence " << g;
        ASSERT_EQ(target[t], first + t + 1) << "step " << step << " sequence " << g;
      }
      shards_seen.insert(first / 1000);
    }
  }
  EXPECT_EQ(shards_seen.size(), 3u) << "160 draws never reached some shard";

  // Validation: A holds 4 whole windows, B 6, C 3; window 4 is B's first, 13 wraps to A's.
  ASSERT_EQ(sampler.window_count(), 13);
  const TokenBatch windows = sampler.sequential(3, 3);
  const TokenBatch wrapped = sampler.sequential(13, 1);
  EXPECT_EQ(windows.inputs.data<std::int32_t>()[0], 24);
  EXPECT_EQ(windows.inputs.data<std::int32_t>()[seq_len], 1000);
  EXPECT_EQ(windows.inputs.data<std::int32_t>()[2 * seq_len], 1008);
  EXPECT_EQ(wrapped.inputs.data<std::int32_t>()[0], 0);
}

// Splitting one file's tokens into shards changes which windows exist (none spans a shard),
// but one shard samples exactly as the file did before datasets had shards.
TEST(TokenDataset, OneShardSamplesAsTheFileAlone) {
  TempDir dir;
  write_counting(dir, "only.bin", 5000, 0);
  const TokenDataset data = TokenDataset::open("data.train", dir.file("only.bin"));
  const BatchSampler sampler(data, 64, 3, "data.train");
  for (std::int64_t g = 0; g < 16; ++g) {
    const Philox4 r = philox_bits({3, mix_stream(hash_name("data.train"), 5)},
                                  static_cast<std::uint64_t>(g));
    const std::uint64_t bits = (std::uint64_t{r.v[1]} << 32) | r.v[0];
    EXPECT_EQ(sampler.sample_offset(5, g), static_cast<std::int64_t>(bits % (5000 - 64)));
  }
}

TEST(TokenDataset, EveryShardMustHoldOneSequence) {
  TempDir dir;
  write_counting(dir, "a.bin", 40, 0);
  write_counting(dir, "b.bin", 8, 100);
  const TokenDataset data = TokenDataset::open("data.train", dir.path());
  test::expect_error<DataError>("short shard", [&] { BatchSampler(data, 8, 1, "data.train"); },
                                {"b.bin", "8 tokens", "seq_len 8"});
}

}  // namespace
}  // namespace ternion
