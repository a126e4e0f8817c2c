// TokenShard and write_token_file: round trips of both widths, the width the writer chooses,
// and every malformed-file error.
#include "data/token_shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "data/batch_sampler.h"
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

std::string token_bytes(std::int64_t count, std::int64_t width_bytes = 2) {
  return std::string(width_bytes * count, '\x01');
}

std::vector<std::int32_t> header_of(const std::string& raw) {
  std::vector<std::int32_t> header(256);
  std::memcpy(header.data(), raw.data(), 1024);
  return header;
}

// Tokens of a 128256-word vocabulary, with its extremes and the uint16 boundary present.
std::vector<std::int64_t> random_wide_tokens(std::int64_t n) {
  std::vector<std::int64_t> tokens(n);
  for (std::int64_t i = 0; i < n; ++i) tokens[i] = philox_bits({7, 13}, i).v[0] % 128256;
  tokens[0] = 0;
  tokens[1] = 65535;
  tokens[2] = 65536;
  tokens[n / 2] = 128255;
  return tokens;
}

// Every entry of the directory is `name`: no temporary file is left behind.
void expect_only_file(const TempDir& dir, const std::string& name) {
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), name);
  }
  EXPECT_EQ(entries, name.empty() ? 0 : 1);
}

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
  const std::vector<std::int32_t> header = header_of(raw);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 5000);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header[i], 0) << "header[" << i << "]";

  TokenShard shard = TokenShard::open(path);
  EXPECT_EQ(shard.path(), path);
  EXPECT_EQ(shard.width(), TokenWidth::U16);
  ASSERT_EQ(shard.size(), 5000);
  std::vector<std::int32_t> copied(5000);
  shard.copy_tokens(0, shard.size(), copied.data());
  std::vector<std::int64_t> read_back, expected;
  for (std::int64_t i = 0; i < shard.size(); ++i) {
    read_back.push_back(shard[i]);
    expected.push_back(written[i]);
    ASSERT_EQ(copied[i], static_cast<std::int32_t>(shard[i])) << "token " << i;
  }
  test::expect_same_ints("round trip tokens", read_back, expected);
  EXPECT_EQ(shard.max_token(), 65535u);
  EXPECT_EQ(shard.max_token(), 65535u);  // cached value agrees

  expect_only_file(dir, "round.bin");
}

TEST(TokenShard, RoundTrip32) {
  TempDir dir;
  const std::string path = dir.file("wide.bin");
  const std::vector<std::int64_t> written = random_wide_tokens(5000);
  write_token_file(path, written);

  // The bytes on disk are llm.c's "llama-3" layout.
  const std::string raw = test::read_raw_file(path);
  ASSERT_EQ(raw.size(), 1024u + 4 * written.size());
  const std::vector<std::int32_t> header = header_of(raw);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(header[2], 5000);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header[i], 0) << "header[" << i << "]";
  std::uint32_t first_tokens[3];
  std::memcpy(first_tokens, raw.data() + 1024, sizeof(first_tokens));
  EXPECT_EQ(first_tokens[2], 65536u);

  TokenShard shard = TokenShard::open(path);
  EXPECT_EQ(shard.width(), TokenWidth::U32);
  ASSERT_EQ(shard.size(), 5000);
  std::vector<std::int32_t> copied(4990);
  shard.copy_tokens(7, 4990, copied.data());
  std::vector<std::int64_t> read_back, copied_back(copied.begin(), copied.end());
  for (std::int64_t i = 0; i < shard.size(); ++i) read_back.push_back(shard[i]);
  test::expect_same_ints("32-bit round trip tokens", read_back, written);
  test::expect_same_ints("32-bit copied tokens", copied_back,
                         std::vector<std::int64_t>(written.begin() + 7, written.end() - 3));
  expect_only_file(dir, "wide.bin");
}

TEST(TokenShard, MaxTokenAbove65535) {
  TempDir dir;
  write_token_file(dir.file("wide.bin"), std::vector<std::int64_t>{5, 128255, 70000, 0});
  TokenShard shard = TokenShard::open(dir.file("wide.bin"));
  EXPECT_EQ(shard.max_token(), 128255u);
  EXPECT_EQ(shard.max_token(), 128255u);  // cached value agrees
  // The largest token the writer takes survives the round trip.
  write_token_file(dir.file("top.bin"), std::vector<std::int64_t>{2147483647, 1});
  EXPECT_EQ(TokenShard::open(dir.file("top.bin")).max_token(), 2147483647u);
}

TEST(WriteTokenFile, WidthFollowsTheLargestToken) {
  TempDir dir;
  struct Case {
    std::vector<std::int64_t> tokens;
    std::int32_t magic, version;
    std::size_t bytes;
  };
  const std::vector<Case> cases = {
      {{0, 65535, 3}, 20240520, 1, 1024 + 3 * 2},
      {{0, 65536, 3}, 20240801, 7, 1024 + 3 * 4},
      {{}, 20240520, 1, 1024},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file("w.bin");
    write_token_file(path, c.tokens);
    const std::string raw = test::read_raw_file(path);
    const std::string label = "largest token " +
                              (c.tokens.empty() ? std::string("none")
                                                : std::to_string(c.tokens[1]));
    ASSERT_EQ(raw.size(), c.bytes) << label;
    EXPECT_EQ(header_of(raw)[0], c.magic) << label;
    EXPECT_EQ(header_of(raw)[1], c.version) << label;
    TokenShard shard = TokenShard::open(path);
    ASSERT_EQ(shard.size(), static_cast<std::int64_t>(c.tokens.size())) << label;
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      EXPECT_EQ(shard[static_cast<std::int64_t>(i)], c.tokens[i]) << label << " token " << i;
  }
}

TEST(WriteTokenFile, WidthOnRequest) {
  TempDir dir;
  // Small tokens written as uint32 when asked, from either overload.
  write_token_file(dir.file("a.bin"), std::vector<std::int64_t>{1, 2, 300}, TokenWidth::U32);
  write_token_file(dir.file("b.bin"), std::vector<std::uint16_t>{1, 2, 300}, TokenWidth::U32);
  write_token_file(dir.file("c.bin"), std::vector<std::int64_t>{1, 2, 300}, TokenWidth::U16);
  for (const char* name : {"a.bin", "b.bin"}) {
    const std::string raw = test::read_raw_file(dir.file(name));
    ASSERT_EQ(raw.size(), 1024u + 3 * 4) << name;
    EXPECT_EQ(header_of(raw)[1], 7) << name;
    TokenShard shard = TokenShard::open(dir.file(name));
    EXPECT_EQ(shard.width(), TokenWidth::U32) << name;
    EXPECT_EQ(shard[2], 300u) << name;
  }
  EXPECT_EQ(TokenShard::open(dir.file("c.bin")).width(), TokenWidth::U16);

  // uint16 asked for, a token does not fit: refused, nothing written.
  TempDir empty;
  const std::string path = empty.file("narrow.bin");
  expect_error<DataError>("forced uint16",
                          [&] {
                            write_token_file(path, std::vector<std::int64_t>{1, 65536},
                                             TokenWidth::U16);
                          },
                          {path, "token 65536", "uint16", "version 7"});
  expect_only_file(empty, "");
}

TEST(WriteTokenFile, RefusesTokensOutsideInt32) {
  TempDir dir;
  const std::string path = dir.file("bad.bin");
  expect_error<DataError>("negative",
                          [&] { write_token_file(path, std::vector<std::int64_t>{4, -1, 2}); },
                          {path, "token -1 at index 1", "outside [0, 2^31)"});
  expect_error<DataError>("2^31",
                          [&] {
                            write_token_file(path, std::vector<std::int64_t>{2147483648});
                          },
                          {path, "token 2147483648 at index 0", "outside [0, 2^31)"});
  expect_only_file(dir, "");
}

TEST(TokenShard, CopyOutOfRangeIsRefused) {
  TempDir dir;
  write_token_file(dir.file("t.bin"), std::vector<std::uint16_t>{1, 2, 3});
  TokenShard shard = TokenShard::open(dir.file("t.bin"));
  std::int32_t out[4];
  expect_error<InternalError>("past the end", [&] { shard.copy_tokens(1, 3, out); },
                              {"tokens [1, 4)", "outside the 3"});
  expect_error<InternalError>("negative", [&] { shard.copy_tokens(-1, 2, out); },
                              {"tokens [-1, 1)"});
}

// The width is invisible above the shard: the same tokens give the same batches.
TEST(TokenShard, SamplerReadsBothWidthsAlike) {
  TempDir dir;
  std::vector<std::uint16_t> tokens(3000);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::uint16_t>(philox_bits({5, 3}, i).v[0]);
  write_token_file(dir.file("narrow.bin"), tokens);
  write_token_file(dir.file("wide.bin"), tokens, TokenWidth::U32);
  TokenDataset narrow = TokenDataset::open("data.train", dir.file("narrow.bin"));
  TokenDataset wide = TokenDataset::open("data.train", dir.file("wide.bin"));
  ASSERT_EQ(narrow.shards()[0].width(), TokenWidth::U16);
  ASSERT_EQ(wide.shards()[0].width(), TokenWidth::U32);
  EXPECT_EQ(narrow.max_token(), wide.max_token());

  const BatchSampler narrow_sampler(narrow, 37, 99, "train");
  const BatchSampler wide_sampler(wide, 37, 99, "train");
  for (std::int64_t step : {1, 2, 50}) {
    const std::string label = "step " + std::to_string(step);
    TokenBatch a = narrow_sampler.sample(step, 3, 8);
    TokenBatch b = wide_sampler.sample(step, 3, 8);
    test::expect_same_ints(label + " inputs", test::ints_of(b.inputs), test::ints_of(a.inputs));
    test::expect_same_ints(label + " targets", test::ints_of(b.targets),
                           test::ints_of(a.targets));
  }
  TokenBatch a = narrow_sampler.sequential(70, 20);  // wraps past window_count() = 81
  TokenBatch b = wide_sampler.sequential(70, 20);
  test::expect_same_ints("sequential inputs", test::ints_of(b.inputs), test::ints_of(a.inputs));
  test::expect_same_ints("sequential targets", test::ints_of(b.targets),
                         test::ints_of(a.targets));
  // And the batches hold the file's tokens, not just the same wrong ones.
  const std::int64_t offset = narrow_sampler.sample_offset(2, 3);
  TokenBatch first = wide_sampler.sample(2, 3, 1);
  EXPECT_EQ(first.inputs.data<std::int32_t>()[0], tokens[static_cast<std::size_t>(offset)]);
  EXPECT_EQ(first.targets.data<std::int32_t>()[36], tokens[static_cast<std::size_t>(offset + 37)]);
}

TEST(TokenShard, MaxTokenOfSmallVocabulary) {
  TempDir dir;
  write_token_file(dir.file("small.bin"), std::vector<std::uint16_t>{3, 255, 17, 0});
  EXPECT_EQ(TokenShard::open(dir.file("small.bin")).max_token(), 255u);
}

TEST(TokenShard, EmptyFileRoundTrip) {
  TempDir dir;
  write_token_file(dir.file("empty.bin"), std::vector<std::uint16_t>{});
  TokenShard shard = TokenShard::open(dir.file("empty.bin"));
  EXPECT_EQ(shard.size(), 0);
  EXPECT_EQ(shard.max_token(), 0u);
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
                          {path, "magic number 12345", "expected 20240520 or 20240801",
                           "not an llm.c token file"});
}

TEST(TokenShard, UnsupportedVersion) {
  TempDir dir;
  const std::string path = dir.file("version.bin");
  const std::vector<std::string> accepted = {"magic 20240520 version 1 (uint16 tokens)",
                                             "magic 20240801 version 7 (uint32 tokens)"};
  auto expect_refused = [&](const std::string& label, std::int32_t magic, std::int32_t version) {
    test::write_raw_file(path, raw_token_file({magic, version, 4}, token_bytes(4, 4)));
    std::vector<std::string> parts = {path, "unsupported version " + std::to_string(version),
                                      "with magic " + std::to_string(magic)};
    parts.insert(parts.end(), accepted.begin(), accepted.end());
    expect_error<DataError>(label, [&] { TokenShard::open(path); }, parts);
  };
  expect_refused("version 2", 20240520, 2);
  expect_refused("version 3 of the 32-bit magic", 20240801, 3);
  // Each magic goes with its own version only, as llm.c writes them.
  expect_refused("32-bit version, 16-bit magic", 20240520, 7);
  expect_refused("16-bit version, 32-bit magic", 20240801, 1);
}

TEST(TokenShard, WidthMustMatchThePayload) {
  TempDir dir;
  const std::string path = dir.file("width.bin");
  // Version 7 over a uint16 payload: half the bytes its count needs.
  test::write_raw_file(path, raw_token_file({20240801, 7, 10}, token_bytes(10, 2)));
  expect_error<DataError>("version 7, uint16 payload", [&] { TokenShard::open(path); },
                          {path, "truncated", "10 tokens", "1064 bytes", "1044 bytes",
                           "version 7 stores uint32 tokens"});
  // Version 1 over a uint32 payload: twice the bytes.
  test::write_raw_file(path, raw_token_file({20240520, 1, 10}, token_bytes(10, 4)));
  expect_error<DataError>("version 1, uint32 payload", [&] { TokenShard::open(path); },
                          {path, "20 trailing bytes", "1044 bytes", "1064 bytes",
                           "version 1 stores uint16 tokens"});
  // Bytes that are not whole uint32 tokens.
  test::write_raw_file(path, raw_token_file({20240801, 7, 10}, token_bytes(10, 4) + "xy"));
  expect_error<DataError>("odd trailing", [&] { TokenShard::open(path); },
                          {path, "2 trailing bytes", "1066 bytes"});
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
