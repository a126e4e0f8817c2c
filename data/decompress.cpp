#include "data/decompress.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <memory>

#include "framework/error.h"

namespace ternion {

namespace {

constexpr std::size_t kChunk = std::size_t{1} << 20;  // output grown by this much a call

bool starts_with(const std::string& bytes, std::size_t at, std::string_view magic) {
  return bytes.size() - std::min(at, bytes.size()) >= magic.size() &&
         bytes.compare(at, magic.size(), magic) == 0;
}

constexpr std::string_view kGzipMagic = "\x1f\x8b";
constexpr std::string_view kZstdMagic = "\x28\xb5\x2f\xfd";

// A Zstandard frame, or a skippable frame (magic 0x184D2A50 to 0x184D2A5F, as pzstd's files
// begin), which zstd reads past.
bool is_zstd(const std::string& bytes) {
  if (starts_with(bytes, 0, kZstdMagic)) return true;
  return bytes.size() >= 4 && (static_cast<unsigned char>(bytes[0]) & 0xF0) == 0x50 &&
         bytes.compare(1, 3, "\x2a\x4d\x18") == 0;
}

// Every gzip member in turn, as gzip -d reads them.
std::string gunzip(const std::string& bytes, const std::string& source) {
  z_stream stream{};
  TN_CHECK(inflateInit2(&stream, 15 + 16) == Z_OK, "zlib: cannot start inflating");
  const std::unique_ptr<z_stream, int (*)(z_stream*)> ending(&stream, inflateEnd);
  std::string text;
  std::size_t fed = 0;  // bytes given to zlib so far
  for (;;) {
    if (stream.avail_in == 0 && fed < bytes.size()) {  // zlib counts input in 32 bits
      const std::size_t part = std::min<std::size_t>(bytes.size() - fed, std::size_t{1} << 30);
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + fed));
      stream.avail_in = static_cast<uInt>(part);
      fed += part;
    }
    const std::size_t start = text.size();
    text.resize(start + kChunk);
    stream.next_out = reinterpret_cast<Bytef*>(text.data() + start);
    stream.avail_out = static_cast<uInt>(kChunk);
    const int status = inflate(&stream, Z_NO_FLUSH);
    text.resize(start + kChunk - stream.avail_out);
    if (status == Z_STREAM_END) {
      const std::size_t end = fed - stream.avail_in;
      if (end == bytes.size()) return text;
      TN_CHECK_AS(DataError, starts_with(bytes, end, kGzipMagic), source, ": ", bytes.size() - end,
                  " bytes after the gzip data (at byte ", end,
                  ") that are not another gzip member");
      inflateReset(&stream);
      continue;
    }
    TN_CHECK_AS(DataError, status != Z_BUF_ERROR, source,
                ": the gzip data ends early: the file is cut short");
    TN_CHECK_AS(DataError, status == Z_OK, source, ": corrupt gzip data (",
                stream.msg != nullptr ? stream.msg : "zlib error " + std::to_string(status),
                ") near byte ", fed - stream.avail_in);
  }
}

// Every Zstandard frame in turn: the stream decoder begins the next where one ends.
std::string unzstd(const std::string& bytes, const std::string& source) {
  const std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(),
                                                                        ZSTD_freeDCtx);
  TN_CHECK(context != nullptr, "zstd: cannot make a decompression context");
  // Windows up to zstd's largest (files made with --long=31), as `zstd -d --long=31` reads them.
  ZSTD_DCtx_setParameter(context.get(), ZSTD_d_windowLogMax, 31);
  std::string text;
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  std::size_t left = 0;  // 0 where a frame has just ended, whole and flushed
  for (;;) {
    const std::size_t start = text.size();
    text.resize(start + kChunk);
    ZSTD_outBuffer out{text.data() + start, kChunk, 0};
    left = ZSTD_decompressStream(context.get(), &out, &in);
    text.resize(start + out.pos);
    TN_CHECK_AS(DataError, !ZSTD_isError(left), source, ": corrupt Zstandard data (",
                ZSTD_getErrorName(left), ") near byte ", in.pos);
    // All read, and the last frame whole and flushed; or nothing more to come of what is read
    // (a call past a frame's end would begin another, waiting for its header).
    if (in.pos == in.size && (left == 0 || out.pos < kChunk)) break;
  }
  TN_CHECK_AS(DataError, left == 0, source,
              ": the Zstandard data ends early: the file is cut short");
  return text;
}

}  // namespace

std::string decompress(std::string bytes, const std::string& source) {
  if (starts_with(bytes, 0, kGzipMagic)) return gunzip(bytes, source);
  if (is_zstd(bytes)) return unzstd(bytes, source);
  return bytes;
}

}  // namespace ternion
