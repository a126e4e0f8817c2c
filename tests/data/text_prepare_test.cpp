// prepare_text / prepare_text_file: split sizes and contents, val_fraction rules, errors.
#include "data/text_prepare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "data/token_shard.h"
#include "data_test_support.h"

namespace ternion {
namespace {

using test::expect_error;
using test::TempDir;

std::string sample_text(std::size_t n) {
  std::string text;
  for (std::size_t i = 0; i < n; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  return text;
}

std::string shard_text(const std::string& path) {
  TokenShard shard = TokenShard::open(path);
  std::string text;
  for (std::int64_t i = 0; i < shard.size(); ++i) text += static_cast<char>(shard[i]);
  return text;
}

TEST(PrepareText, SplitsTheLastFractionIntoValidation) {
  TempDir dir;
  const std::string text = sample_text(1000);
  PrepareResult result = prepare_text(text, dir.path(), {.val_fraction = 0.1});
  EXPECT_EQ(result.train_tokens, 900);
  EXPECT_EQ(result.val_tokens, 100);
  EXPECT_EQ(shard_text(dir.file("train.bin")), text.substr(0, 900));
  EXPECT_EQ(shard_text(dir.file("val.bin")), text.substr(900));
}

TEST(PrepareText, SplitRoundsTheValidationSizeDown) {
  TempDir dir;
  PrepareResult result = prepare_text(sample_text(1001), dir.path(), {.val_fraction = 0.25});
  EXPECT_EQ(result.val_tokens, 250);
  EXPECT_EQ(result.train_tokens, 751);
  result = prepare_text(sample_text(10), dir.path(), {.val_fraction = 0.5});
  EXPECT_EQ(result.val_tokens, 5);
  EXPECT_EQ(result.train_tokens, 5);
}

TEST(PrepareText, ZeroFractionWritesNoValidationFile) {
  TempDir dir;
  prepare_text(sample_text(100), dir.path(), {.val_fraction = 0.2});
  ASSERT_TRUE(std::filesystem::exists(dir.file("val.bin")));
  PrepareResult result = prepare_text(sample_text(300), dir.path(), {.val_fraction = 0.0});
  EXPECT_EQ(result.train_tokens, 300);
  EXPECT_EQ(result.val_tokens, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.file("val.bin")))
      << "a val.bin from another text was left beside the new train.bin";
  EXPECT_EQ(TokenShard::open(dir.file("train.bin")).size(), 300);
}

TEST(PrepareText, CreatesNestedOutputDirectories) {
  TempDir dir;
  const std::string nested = dir.file("a/b/c");
  prepare_text(sample_text(50), nested, {.val_fraction = 0.1});
  EXPECT_EQ(TokenShard::open(nested + "/train.bin").size(), 45);
  EXPECT_EQ(TokenShard::open(nested + "/val.bin").size(), 5);
}

TEST(PrepareText, ValFractionOutOfRangeIsRefused) {
  TempDir dir;
  for (double bad : {-0.1, 0.51, 1.0, std::nan("")}) {
    std::string label = "val_fraction " + std::to_string(bad);
    expect_error<UsageError>(label,
                             [&] { prepare_text("some text", dir.path(), {.val_fraction = bad}); },
                             {"val_fraction", "[0, 0.5]"});
    // Checked before the file is even read.
    expect_error<UsageError>(label + " (file)",
                             [&] {
                               prepare_text_file(dir.file("nope.txt"), dir.path(),
                                                 {.val_fraction = bad});
                             },
                             {"val_fraction"});
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("train.bin")));
}

TEST(PrepareText, BadInputs) {
  TempDir dir;
  const std::string missing = dir.file("missing.txt");
  expect_error<DataError>("missing",
                          [&] { prepare_text_file(missing, dir.file("out"), {}); },
                          {missing, "cannot open"});
  const std::string empty = dir.file("empty.txt");
  test::write_raw_file(empty, "");
  expect_error<DataError>("empty file",
                          [&] { prepare_text_file(empty, dir.file("out"), {}); },
                          {empty, "empty"});
  expect_error<DataError>("directory as input",
                          [&] { prepare_text_file(dir.path(), dir.file("out"), {}); },
                          {dir.path(), "cannot read"});
  // A text among the files the preparation writes or removes is refused, and kept.
  for (const char* name : {"train.bin", "val_000003.bin", "tokenizer.json"}) {
    const std::string text = dir.file(std::string("out/") + name);
    std::filesystem::create_directories(dir.file("out"));
    test::write_raw_file(text, "some text to prepare");
    expect_error<DataError>(name, [&] { prepare_text_file(text, dir.file("out/."), {}); },
                            {text, "replaces or removes"});
    EXPECT_EQ(read_text_file(text), "some text to prepare") << name;
  }
  EXPECT_FALSE(is_replaced_by_preparation(dir.file("out/notes.txt"), dir.file("out")));
  expect_error<DataError>("empty text",
                          [&] { prepare_text("", dir.file("out"), {.val_fraction = 0.1}); },
                          {"empty"});
  const std::string tiny = dir.file("tiny.txt");
  test::write_raw_file(tiny, "abc");
  expect_error<DataError>("too short for a split",
                          [&] { prepare_text_file(tiny, dir.file("out"), {.val_fraction = 0.1}); },
                          {tiny, "3 bytes", "val_fraction of 0"});
}

TEST(PrepareText, OutputPathThatIsAFile) {
  TempDir dir;
  const std::string file = dir.file("a_file");
  test::write_raw_file(file, "x");
  expect_error<DataError>("output is a file",
                          [&] { prepare_text("hello", file, {.val_fraction = 0.0}); },
                          {file});
  expect_error<DataError>("output under a file",
                          [&] { prepare_text("hello", file + "/sub", {.val_fraction = 0.0}); },
                          {file + "/sub"});
}

// train.bin and val.bin are replaced as a pair: when the new val.bin cannot be written, the
// old train.bin stays beside the old val.bin (and no .new file is left).
TEST(PrepareText, AFailedWriteLeavesTheOldPair) {
  TempDir dir;
  const std::string old_text = sample_text(100);
  prepare_text(old_text, dir.path(), {.val_fraction = 0.2});
  std::filesystem::create_directory(dir.file("val.bin.new"));  // the new val.bin cannot land
  EXPECT_THROW(prepare_text(sample_text(300), dir.path(), {.val_fraction = 0.2}), DataError);
  EXPECT_EQ(shard_text(dir.file("train.bin")), old_text.substr(0, 80));
  EXPECT_EQ(shard_text(dir.file("val.bin")), old_text.substr(80));
  EXPECT_FALSE(std::filesystem::exists(dir.file("train.bin.new")));
}

TEST(PrepareText, FileVersionMatchesTextVersion) {
  TempDir dir;
  const std::string text = sample_text(4000);
  test::write_raw_file(dir.file("in.txt"), text);
  PrepareResult from_file =
      prepare_text_file(dir.file("in.txt"), dir.file("f"), {.val_fraction = 0.05});
  PrepareResult from_text = prepare_text(text, dir.file("t"), {.val_fraction = 0.05});
  EXPECT_EQ(from_file.train_tokens, from_text.train_tokens);
  EXPECT_EQ(from_file.val_tokens, from_text.val_tokens);
  EXPECT_EQ(test::read_raw_file(dir.file("f/train.bin")),
            test::read_raw_file(dir.file("t/train.bin")));
  EXPECT_EQ(test::read_raw_file(dir.file("f/val.bin")), test::read_raw_file(dir.file("t/val.bin")));
}

// Shards split a split into the fewest files of at most shard_tokens tokens, sizes within one
// token of each other, which together hold the split's tokens in order.
TEST(PrepareText, ShardsHoldTheSplitInBalancedFiles) {
  TempDir dir;
  const std::string text = sample_text(1050);
  const PrepareResult result =
      prepare_text(text, dir.path(), {.val_fraction = 0.1, .shard_tokens = 300});
  ASSERT_EQ(result.train_files.size(), 4u);  // 945 tokens: 236, 236, 236, 237
  ASSERT_EQ(result.val_files, std::vector<std::string>{dir.file("val_000000.bin")});
  std::string train;
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(result.train_files[k], dir.file("train_00000" + std::to_string(k) + ".bin"));
    const std::string part = shard_text(result.train_files[k]);
    EXPECT_GE(part.size(), 236u);
    EXPECT_LE(part.size(), 237u);
    train += part;
  }
  EXPECT_EQ(train, text.substr(0, 945));
  EXPECT_EQ(shard_text(dir.file("val_000000.bin")), text.substr(945));
  EXPECT_EQ(TokenShard::open(result.train_files[0]).width(), TokenWidth::U16);
}

// A new preparation removes what an earlier one wrote and it does not (more shards, the other
// naming, a validation split now absent), and nothing else in the directory.
TEST(PrepareText, RemovesTheFilesOfAnEarlierPreparation) {
  TempDir dir;
  namespace fs = std::filesystem;
  test::write_raw_file(dir.file("corpus.txt"), "the user's");
  test::write_raw_file(dir.file("train_extra.bin"), "not ours by its name");
  prepare_text(sample_text(2000), dir.path(), {.val_fraction = 0.2, .shard_tokens = 400});
  EXPECT_TRUE(fs::exists(dir.file("train_000003.bin")));
  EXPECT_TRUE(fs::exists(dir.file("val_000000.bin")));
  prepare_text(sample_text(2000), dir.path(), {.val_fraction = 0.0, .shard_tokens = 1000});
  EXPECT_TRUE(fs::exists(dir.file("train_000001.bin")));
  EXPECT_FALSE(fs::exists(dir.file("train_000002.bin")));
  EXPECT_FALSE(fs::exists(dir.file("val_000000.bin")));
  prepare_text(sample_text(2000), dir.path(), {.val_fraction = 0.1});
  EXPECT_TRUE(fs::exists(dir.file("train.bin")));
  EXPECT_TRUE(fs::exists(dir.file("val.bin")));
  EXPECT_FALSE(fs::exists(dir.file("train_000000.bin")));
  EXPECT_TRUE(fs::exists(dir.file("corpus.txt")));
  EXPECT_TRUE(fs::exists(dir.file("train_extra.bin")));
}

// The leftovers of a preparation that died half-way (its .new and temporary files) go too.
TEST(PrepareText, RemovesLeftoversOfAnInterruptedPreparation) {
  TempDir dir;
  for (const char* name : {"train.bin.new", "val_000003.bin.tmp.4242", "tokenizer.json.new"})
    test::write_raw_file(dir.file(name), "half");
  prepare_text(sample_text(500), dir.path(), {});
  for (const char* name : {"train.bin.new", "val_000003.bin.tmp.4242", "tokenizer.json.new"})
    EXPECT_FALSE(std::filesystem::exists(dir.file(name))) << name;
}

TEST(PrepareText, TooFewTokensForTheSplitAreRefused) {
  TempDir dir;
  expect_error<DataError>(
      "five bytes", [&] { prepare_text("abcde", dir.path(), {.val_fraction = 0.1}, "tiny"); },
      {"tiny: only 5 bytes, too few for a validation fraction of 0.1 (the split would get none)"});
  expect_error<DataError>("no tokens",
                          [&] {
                            prepare_tokens(std::vector<std::int32_t>(), dir.path(),
                                           {.val_fraction = 0}, "none", 0);
                          },
                          {"none: no tokens: the tokenizer has no token for any of its bytes"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("train.bin")));
}

TEST(PrepareText, OptionsOutOfRangeAreRefused) {
  TempDir dir;
  expect_error<UsageError>("negative shard size",
                           [&] { prepare_text("text", dir.path(), {.shard_tokens = -1}); },
                           {"shard_tokens -1"});
  expect_error<UsageError>("no threads", [&] { prepare_text("text", dir.path(), {.threads = 0}); },
                           {"threads 0"});
  // Shard names have six digits, which keeps their name order the text's.
  expect_error<UsageError>("a million shards",
                           [&] {
                             prepare_text(sample_text(1000000), dir.path(),
                                          {.val_fraction = 0, .shard_tokens = 1});
                           },
                           {"shard_tokens 1", "1000000 shards", "999999"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("train_000000.bin")));
}

// Documents ('|' starts each here) split whole: validation begins at the document start nearest
// the token cut (15 of 20 at a fraction of 0.25), the later of two as near.
TEST(PrepareText, DocumentsSplitAtTheStartNearestTheCut) {
  const auto split = [](const std::string& text) {
    TempDir dir;
    const std::vector<std::int32_t> tokens(text.begin(), text.end());
    const PrepareResult result = prepare_tokens(
        tokens, dir.path(), {.val_fraction = 0.25, .document_start = '|'}, "docs", 0);
    EXPECT_EQ(result.train_tokens + result.val_tokens, static_cast<std::int64_t>(text.size()));
    EXPECT_EQ(shard_text(dir.file("train.bin")) + shard_text(dir.file("val.bin")), text);
    return std::make_pair(shard_text(dir.file("val.bin")), result.val_documents);
  };
  EXPECT_EQ(split("|aaaa|bbbbbbbbb|cccc"), std::make_pair(std::string("|cccc"), std::int64_t{1}));
  EXPECT_EQ(split("|aaaa|bbbbbbb|cccccc"), std::make_pair(std::string("|cccccc"), std::int64_t{1}));
  EXPECT_EQ(split("|aaaaaaaaaaa|bbbbb|c"), std::make_pair(std::string("|c"), std::int64_t{1}));
  EXPECT_EQ(split("|aaaaaaaaaa|bbb|c|d"), std::make_pair(std::string("|c|d"), std::int64_t{2}));
  EXPECT_EQ(split("|aaaaaaaaaaaaaaaa|bb"), std::make_pair(std::string("|bb"), std::int64_t{1}));
  TempDir dir;
  // One document, or a last one of more than half the tokens: validation would hold most.
  for (const std::string one : {"|aaaaaaaaaaaaaaaaaaa", "|aaaaaaaa|bbbbbbbbbbb"}) {
    expect_error<DataError>(
        one,
        [&] {
          prepare_tokens(std::vector<std::int32_t>(one.begin(), one.end()), dir.path(),
                         {.val_fraction = 0.25, .document_start = '|'}, "docs", 0);
        },
        {"docs: no document starts in the last half of the tokens, and the validation split "
         "takes whole documents"});
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("train.bin")));
}

}  // namespace
}  // namespace ternion
