// TokenShard and write_token_file: round trips and every malformed-file error.
#include "data/token_shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "data_test_support.h"
#include "framework/philox.h"

namespace ternion {
namespace {

using test::expect_error;
using test::TempDir;

// The raw bytes of a token file: a header of `header_ints` (the rest zero) and `payload`.
std::string raw_token_file(std::vector<std::int32_t> header_ints, const std::string& payload) {
  std::vector<std::int32_t> header(256, 0);
  std::copy(header_ints.begin(), header_ints.end(), header.begin());
  std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
  return bytes + payload;
}

std::string token_bytes(std::int64_t count) { return std::string(2 * count, '\x01'); }

std::vector<std::uint16_t> random_tokens(std::int64_t n) {
  std::vector<std::uint16_t> tokens(n);
  for (std::int64_t i = 0; i < n; ++i)
    tokens[i] = static_cast<std::uint16_t>(philox_bits({7, 11}, i).v[0]);
  tokens[0] = 0;
  tokens[n / 2] = 65535;
  return tokens;
}

TEST(TokenShard, RoundTrip) {
  TempDir dir;
  const std::string path = dir.file("round.bin");
  const std::vector<std::uint16_t> written = random_tokens(5000);
  write_token_file(path, written);

  // The bytes on disk are llm.c's layout.
  const std::string raw = test::read_raw_file(path);
  ASSERT_EQ(raw.size(), 1024u + 2 * written.size());
  std::int32_t header[256];
  std::memcpy(header, raw.data(), sizeof(header));
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 5000);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header[i], 0) << "header[" << i << "]";

  TokenShard shard = TokenShard::open(path);
  EXPECT_EQ(shard.path(), path);
  ASSERT_EQ(shard.size(), 5000);
  std::vector<std::int64_t> read_back, expected;
  for (std::int64_t i = 0; i < shard.size(); ++i) {
    read_back.push_back(shard[i]);
    expected.push_back(written[i]);
    ASSERT_EQ(shard.tokens()[i], shard[i]);
  }
  test::expect_same_ints("round trip tokens", read_back, expected);
  EXPECT_EQ(shard.max_token(), 65535);
  EXPECT_EQ(shard.max_token(), 65535);  // cached value agrees

  // No temporary file is left beside the result.
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), "round.bin");
  }
  EXPECT_EQ(entries, 1);
}

TEST(TokenShard, MaxTokenOfSmallVocabulary) {
  TempDir dir;
  write_token_file(dir.file("small.bin"), std::vector<std::uint16_t>{3, 255, 17, 0});
  EXPECT_EQ(TokenShard::open(dir.file("small.bin")).max_token(), 255);
}

TEST(TokenShard, EmptyFileRoundTrip) {
  TempDir dir;
  write_token_file(dir.file("empty.bin"), {});
  TokenShard shard = TokenShard::open(dir.file("empty.bin"));
  EXPECT_EQ(shard.size(), 0);
  EXPECT_EQ(shard.max_token(), 0);
}

TEST(TokenShard, OverwriteReplacesTheFile) {
  TempDir dir;
  write_token_file(dir.file("t.bin"), std::vector<std::uint16_t>(100, 5));
  write_token_file(dir.file("t.bin"), std::vector<std::uint16_t>{9, 8, 7});
  TokenShard shard = TokenShard::open(dir.file("t.bin"));
  ASSERT_EQ(shard.size(), 3);
  EXPECT_EQ(shard[0], 9);
  EXPECT_EQ(shard[2], 7);
}

TEST(TokenShard, MoveKeepsTheMapping) {
  TempDir dir;
  write_token_file(dir.file("a.bin"), std::vector<std::uint16_t>{1, 2, 3});
  write_token_file(dir.file("b.bin"), std::vector<std::uint16_t>{4, 5});
  TokenShard a = TokenShard::open(dir.file("a.bin"));
  EXPECT_EQ(a.max_token(), 3);
  TokenShard moved(std::move(a));
  EXPECT_EQ(a.size(), 0);  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  ASSERT_EQ(moved.size(), 3);
  EXPECT_EQ(moved[2], 3);
  EXPECT_EQ(moved.max_token(), 3);
  EXPECT_EQ(moved.path(), dir.file("a.bin"));

  TokenShard b = TokenShard::open(dir.file("b.bin"));
  moved = std::move(b);
  ASSERT_EQ(moved.size(), 2);
  EXPECT_EQ(moved[1], 5);
  EXPECT_EQ(moved.max_token(), 5);
  EXPECT_EQ(moved.path(), dir.file("b.bin"));
}

TEST(TokenShard, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("missing.bin");
  expect_error<DataError>("missing", [&] { TokenShard::open(path); },
                          {path, "cannot open", std::strerror(ENOENT)});
}

TEST(TokenShard, DirectoryIsRefused) {
  TempDir dir;
  expect_error<DataError>("directory", [&] { TokenShard::open(dir.path()); },
                          {dir.path(), "is a directory"});
}

TEST(TokenShard, ShorterThanHeader) {
  TempDir dir;
  const std::string path = dir.file("short.bin");
  test::write_raw_file(path, std::string(100, '\0'));
  expect_error<DataError>("short", [&] { TokenShard::open(path); },
                          {path, "only 100 bytes", "1024-byte header"});
  test::write_raw_file(path, "");
  expect_error<DataError>("zero bytes", [&] { TokenShard::open(path); },
                          {path, "only 0 bytes", "1024-byte header"});
}

TEST(TokenShard, WrongMagic) {
  TempDir dir;
  const std::string path = dir.file("magic.bin");
  test::write_raw_file(path, raw_token_file({12345, 1, 4}, token_bytes(4)));
  expect_error<DataError>("magic", [&] { TokenShard::open(path); },
                          {path, "magic number 12345", "expected 20240520",
                           "not an llm.c token file"});
}

TEST(TokenShard, UnsupportedVersion) {
  TempDir dir;
  const std::string path = dir.file("version.bin");
  test::write_raw_file(path, raw_token_file({20240520, 2, 4}, token_bytes(4)));
  expect_error<DataError>("version", [&] { TokenShard::open(path); },
                          {path, "unsupported version 2", "version 1"});
}

TEST(TokenShard, Truncated) {
  TempDir dir;
  const std::string path = dir.file("truncated.bin");
  test::write_raw_file(path, raw_token_file({20240520, 1, 100}, token_bytes(50)));
  expect_error<DataError>("truncated", [&] { TokenShard::open(path); },
                          {path, "truncated", "100 tokens", "1224 bytes", "1124 bytes"});
}

TEST(TokenShard, TrailingBytes) {
  TempDir dir;
  const std::string path = dir.file("trailing.bin");
  test::write_raw_file(path, raw_token_file({20240520, 1, 10}, token_bytes(12)));
  expect_error<DataError>("trailing", [&] { TokenShard::open(path); },
                          {path, "4 trailing bytes", "10 tokens", "1044 bytes", "1048 bytes"});
  // An odd byte count cannot be whole tokens either.
  test::write_raw_file(path, raw_token_file({20240520, 1, 10}, token_bytes(10) + "x"));
  expect_error<DataError>("odd trailing", [&] { TokenShard::open(path); },
                          {path, "1 trailing bytes", "1045 bytes"});
}

TEST(TokenShard, NegativeCount) {
  TempDir dir;
  const std::string path = dir.file("negative.bin");
  test::write_raw_file(path, raw_token_file({20240520, 1, -3}, ""));
  expect_error<DataError>("negative", [&] { TokenShard::open(path); },
                          {path, "negative token count -3"});
}

TEST(WriteTokenFile, UnwritableDirectory) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/out.bin");
  const std::vector<std::uint16_t> tokens = {1};
  expect_error<DataError>("unwritable", [&] { write_token_file(path, tokens); },
                          {path, "cannot write token file", std::strerror(ENOENT)});
}

}  // namespace
}  // namespace ternion
