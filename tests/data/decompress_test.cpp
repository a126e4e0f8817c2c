// decompress: gzip and Zstandard made here by zlib and libzstd come back byte for byte, whole
// files of several streams included; plain bytes pass through; damaged data is refused by name.
#include "data/decompress.h"

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include "data_test_support.h"

namespace ternion {
namespace {

using test::expect_error;

// Bytes that do not compress to nothing: a few MiB, past the reader's 1 MiB output steps.
std::string sample_bytes(std::size_t n) {
  std::string bytes(n, '\0');
  std::uint32_t state = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    bytes[i] = static_cast<char>(i % 7 == 0 ? state >> 24 : 'a' + (state >> 28));
  }
  return bytes;
}

std::string gzip(const std::string& bytes) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, bytes.size()) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::string zstd(const std::string& bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  const std::size_t size = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3);
  EXPECT_FALSE(ZSTD_isError(size));
  out.resize(size);
  return out;
}

TEST(Decompress, GzipAndZstandardComeBackWhole) {
  const std::string bytes = sample_bytes(3 << 20);
  EXPECT_EQ(decompress(gzip(bytes), "x.gz"), bytes);
  EXPECT_EQ(decompress(zstd(bytes), "x.zst"), bytes);
  EXPECT_EQ(decompress(gzip(""), "empty.gz"), "");
  EXPECT_EQ(decompress(zstd(""), "empty.zst"), "");
}

// As pigz and `cat a.gz b.gz` make them, and zstd's multi-frame files.
TEST(Decompress, EveryStreamOfAFileIsRead) {
  const std::string a = sample_bytes(1500000), b = "second part\n", c = sample_bytes(5000);
  EXPECT_EQ(decompress(gzip(a) + gzip(b) + gzip(c), "parts.gz"), a + b + c);
  EXPECT_EQ(decompress(zstd(a) + zstd(b) + zstd(c), "parts.zst"), a + b + c);
}

// pzstd's files begin with a skippable frame; zstd --long=31 writes windows past the default.
TEST(Decompress, SkippableFramesAndLongWindowsAreZstandard) {
  const std::string bytes = sample_bytes(100000);
  const std::string skippable = std::string("\x50\x2a\x4d\x18\x04\x00\x00\x00", 8) + "meta";
  EXPECT_EQ(decompress(skippable + zstd(bytes), "p.zst"), bytes);
  // Streamed, its size unknown to the compressor: the frame asks for the whole 2 GiB window.
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, 31);
  ZSTD_CCtx_setParameter(context, ZSTD_c_enableLongDistanceMatching, 1);
  std::string out(ZSTD_compressBound(bytes.size()) + 1024, '\0');
  ZSTD_outBuffer sink{out.data(), out.size(), 0};
  ZSTD_inBuffer source{bytes.data(), bytes.size(), 0};
  ASSERT_FALSE(ZSTD_isError(ZSTD_compressStream2(context, &sink, &source, ZSTD_e_continue)));
  ZSTD_inBuffer none{nullptr, 0, 0};
  std::size_t left = 1;
  while (left != 0) {
    left = ZSTD_compressStream2(context, &sink, &none, ZSTD_e_end);
    ASSERT_FALSE(ZSTD_isError(left)) << ZSTD_getErrorName(left);
  }
  ZSTD_freeCCtx(context);
  out.resize(sink.pos);
  EXPECT_EQ(decompress(out, "long.zst"), bytes);
}

TEST(Decompress, OtherBytesPassThrough) {
  for (const std::string& bytes :
       {std::string("plain text\n"), std::string(""), std::string("\x1f"),
        std::string("\x1f\x8a rest"), std::string("\x28\xb5\x2f")})
    EXPECT_EQ(decompress(bytes, "plain"), bytes);
}

TEST(Decompress, DamagedDataIsRefusedByName) {
  const std::string bytes = sample_bytes(200000);
  const std::string gz = gzip(bytes), zst = zstd(bytes);
  expect_error<DataError>("cut gzip", [&] { decompress(gz.substr(0, gz.size() / 2), "a.gz"); },
                          {"a.gz: the gzip data ends early: the file is cut short"});
  expect_error<DataError>("cut gzip trailer",
                          [&] { decompress(gz.substr(0, gz.size() - 3), "a.gz"); },
                          {"a.gz: the gzip data ends early"});
  std::string flipped = gz;
  flipped[gz.size() - 6] ^= 0x55;  // the trailer's CRC
  expect_error<DataError>("bad crc", [&] { decompress(flipped, "a.gz"); },
                          {"a.gz: corrupt gzip data (incorrect data check)"});
  expect_error<DataError>("trailing bytes", [&] { decompress(gz + "junk", "a.gz"); },
                          {"a.gz: 4 bytes after the gzip data (at byte " +
                           std::to_string(gz.size()) + ") that are not another gzip member"});
  expect_error<DataError>("cut zstd", [&] { decompress(zst.substr(0, zst.size() / 2), "a.zst"); },
                          {"a.zst: the Zstandard data ends early: the file is cut short"});
  std::string damaged = zst;
  for (std::size_t i = 20; i < 60; ++i) damaged[i] = static_cast<char>(0xff);
  expect_error<DataError>("corrupt zstd", [&] { decompress(damaged, "a.zst"); },
                          {"a.zst: corrupt Zstandard data ("});
}

}  // namespace
}  // namespace ternion
