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
  PrepareResult result = prepare_text(text, dir.path(), 0.1);
  EXPECT_EQ(result.train_tokens, 900);
  EXPECT_EQ(result.val_tokens, 100);
  EXPECT_EQ(shard_text(dir.file("train.bin")), text.substr(0, 900));
  EXPECT_EQ(shard_text(dir.file("val.bin")), text.substr(900));
}

TEST(PrepareText, SplitRoundsTheValidationSizeDown) {
  TempDir dir;
  PrepareResult result = prepare_text(sample_text(1001), dir.path(), 0.25);
  EXPECT_EQ(result.val_tokens, 250);
  EXPECT_EQ(result.train_tokens, 751);
  result = prepare_text(sample_text(10), dir.path(), 0.5);
  EXPECT_EQ(result.val_tokens, 5);
  EXPECT_EQ(result.train_tokens, 5);
}

TEST(PrepareText, ZeroFractionWritesNoValidationFile) {
  TempDir dir;
  prepare_text(sample_text(100), dir.path(), 0.2);
  ASSERT_TRUE(std::filesystem::exists(dir.file("val.bin")));
  PrepareResult result = prepare_text(sample_text(300), dir.path(), 0.0);
  EXPECT_EQ(result.train_tokens, 300);
  EXPECT_EQ(result.val_tokens, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.file("val.bin")))
      << "a val.bin from another text was left beside the new train.bin";
  EXPECT_EQ(TokenShard::open(dir.file("train.bin")).size(), 300);
}

TEST(PrepareText, CreatesNestedOutputDirectories) {
  TempDir dir;
  const std::string nested = dir.file("a/b/c");
  prepare_text(sample_text(50), nested, 0.1);
  EXPECT_EQ(TokenShard::open(nested + "/train.bin").size(), 45);
  EXPECT_EQ(TokenShard::open(nested + "/val.bin").size(), 5);
}

TEST(PrepareText, ValFractionOutOfRangeIsRefused) {
  TempDir dir;
  for (double bad : {-0.1, 0.51, 1.0, std::nan("")}) {
    std::string label = "val_fraction " + std::to_string(bad);
    expect_error<UsageError>(label, [&] { prepare_text("some text", dir.path(), bad); },
                             {"val_fraction", "[0, 0.5]"});
    // Checked before the file is even read.
    expect_error<UsageError>(label + " (file)",
                             [&] { prepare_text_file(dir.file("nope.txt"), dir.path(), bad); },
                             {"val_fraction"});
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("train.bin")));
}

TEST(PrepareText, BadInputs) {
  TempDir dir;
  const std::string missing = dir.file("missing.txt");
  expect_error<DataError>("missing", [&] { prepare_text_file(missing, dir.file("out"), 0.1); },
                          {missing, "cannot open"});
  const std::string empty = dir.file("empty.txt");
  test::write_raw_file(empty, "");
  expect_error<DataError>("empty file", [&] { prepare_text_file(empty, dir.file("out"), 0.1); },
                          {empty, "empty"});
  expect_error<DataError>("directory as input",
                          [&] { prepare_text_file(dir.path(), dir.file("out"), 0.1); },
                          {dir.path(), "cannot read"});
  expect_error<DataError>("empty text", [&] { prepare_text("", dir.file("out"), 0.1); },
                          {"empty"});
  const std::string tiny = dir.file("tiny.txt");
  test::write_raw_file(tiny, "abc");
  expect_error<DataError>("too short for a split",
                          [&] { prepare_text_file(tiny, dir.file("out"), 0.1); },
                          {tiny, "3 bytes", "val_fraction of 0"});
}

TEST(PrepareText, OutputPathThatIsAFile) {
  TempDir dir;
  const std::string file = dir.file("a_file");
  test::write_raw_file(file, "x");
  expect_error<DataError>("output is a file", [&] { prepare_text("hello", file, 0.0); },
                          {file});
  expect_error<DataError>("output under a file",
                          [&] { prepare_text("hello", file + "/sub", 0.0); }, {file + "/sub"});
}

// train.bin and val.bin are replaced as a pair: when the new val.bin cannot be written, the
// old train.bin stays beside the old val.bin (and no .new file is left).
TEST(PrepareText, AFailedWriteLeavesTheOldPair) {
  TempDir dir;
  const std::string old_text = sample_text(100);
  prepare_text(old_text, dir.path(), 0.2);
  std::filesystem::create_directory(dir.file("val.bin.new"));  // the new val.bin cannot land
  EXPECT_THROW(prepare_text(sample_text(300), dir.path(), 0.2), DataError);
  EXPECT_EQ(shard_text(dir.file("train.bin")), old_text.substr(0, 80));
  EXPECT_EQ(shard_text(dir.file("val.bin")), old_text.substr(80));
  EXPECT_FALSE(std::filesystem::exists(dir.file("train.bin.new")));
}

TEST(PrepareText, FileVersionMatchesTextVersion) {
  TempDir dir;
  const std::string text = sample_text(4000);
  test::write_raw_file(dir.file("in.txt"), text);
  PrepareResult from_file = prepare_text_file(dir.file("in.txt"), dir.file("f"), 0.05);
  PrepareResult from_text = prepare_text(text, dir.file("t"), 0.05);
  EXPECT_EQ(from_file.train_tokens, from_text.train_tokens);
  EXPECT_EQ(from_file.val_tokens, from_text.val_tokens);
  EXPECT_EQ(test::read_raw_file(dir.file("f/train.bin")),
            test::read_raw_file(dir.file("t/train.bin")));
  EXPECT_EQ(test::read_raw_file(dir.file("f/val.bin")), test::read_raw_file(dir.file("t/val.bin")));
}

}  // namespace
}  // namespace ternion
