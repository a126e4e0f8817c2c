#include "data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "data/atomic_file.h"
#include "framework/error.h"

namespace ternion {

// The file format is little-endian and we read it in place, without byte swapping.
static_assert(std::endian::native == std::endian::little, "token files are read in place");

namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes a descriptor on every exit path of `open`.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::int64_t bytes_per_token(TokenWidth width) { return width == TokenWidth::U32 ? 4 : 2; }

// The width a (magic, version) pair declares, or nullopt for a pair llm.c never writes.
std::optional<TokenWidth> width_of(std::int32_t magic, std::int32_t version) {
  if (magic == kTokenFileMagic16 && version == kTokenFileVersion16) return TokenWidth::U16;
  if (magic == kTokenFileMagic32 && version == kTokenFileVersion32) return TokenWidth::U32;
  return std::nullopt;
}

// Appended to every header refusal, so the message says what would have been read.
std::string accepted_layouts() {
  return "this reader handles magic " + std::to_string(kTokenFileMagic16) + " version " +
         std::to_string(kTokenFileVersion16) + " (uint16 tokens) and magic " +
         std::to_string(kTokenFileMagic32) + " version " + std::to_string(kTokenFileVersion32) +
         " (uint32 tokens)";
}

// The writing both overloads share: the header, then `write_payload(fd)` (false on failure,
// errno set), through a temporary file renamed into place.
template <class WritePayload>
void write_atomically(const std::string& path, std::int64_t count, TokenWidth width,
                      WritePayload write_payload) {
  if (count > std::numeric_limits<std::int32_t>::max())
    TN_THROW(DataError, "cannot write token file '", path, "': ", count,
             " tokens do not fit the format's int32 token count");

  std::vector<std::int32_t> header(kTokenFileHeaderInts, 0);
  header[0] = width == TokenWidth::U32 ? kTokenFileMagic32 : kTokenFileMagic16;
  header[1] = width == TokenWidth::U32 ? kTokenFileVersion32 : kTokenFileVersion16;
  header[2] = static_cast<std::int32_t>(count);

  write_file_atomically(path, "token file", [&](int fd) {
    return write_all(fd, header.data(), header.size() * sizeof(std::int32_t)) &&
           write_payload(fd);
  });
}

// Converts `tokens` to Out a block at a time, so a large shard needs no second full-size copy.
// The caller has checked that every token fits Out.
template <class Out, class In>
bool write_converted(int fd, std::span<const In> tokens) {
  constexpr std::size_t kBlock = 1 << 16;
  std::vector<Out> block;
  block.reserve(std::min(kBlock, tokens.size()));
  for (std::size_t begin = 0; begin < tokens.size(); begin += kBlock) {
    const std::size_t end = std::min(begin + kBlock, tokens.size());
    block.assign(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                 tokens.begin() + static_cast<std::ptrdiff_t>(end));
    if (!write_all(fd, block.data(), block.size() * sizeof(Out))) return false;
  }
  return true;
}

}  // namespace

TokenShard TokenShard::open(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) TN_THROW(DataError, "token file '", path, "': cannot open: ", errno_text());

  struct stat info {};
  if (::fstat(fd.get(), &info) != 0)
    TN_THROW(DataError, "token file '", path, "': cannot stat: ", errno_text());
  if (S_ISDIR(info.st_mode)) TN_THROW(DataError, "token file '", path, "': is a directory");
  if (!S_ISREG(info.st_mode)) TN_THROW(DataError, "token file '", path, "': not a regular file");
  const auto file_bytes = static_cast<std::int64_t>(info.st_size);
  if (file_bytes < kTokenFileHeaderBytes)
    TN_THROW(DataError, "token file '", path, "': only ", file_bytes,
             " bytes, shorter than the ", kTokenFileHeaderBytes, "-byte header");

  void* mapping = ::mmap(nullptr, static_cast<std::size_t>(file_bytes), PROT_READ, MAP_SHARED,
                         fd.get(), 0);
  if (mapping == MAP_FAILED)
    TN_THROW(DataError, "token file '", path, "': cannot map ", file_bytes, " bytes: ",
             errno_text());
  // From here the shard owns the mapping, so every throw below unmaps it.
  TokenShard shard(path, mapping, static_cast<std::size_t>(file_bytes));

  std::int32_t header[3];
  std::memcpy(header, mapping, sizeof(header));
  const std::int32_t magic = header[0], version = header[1];
  if (magic != kTokenFileMagic16 && magic != kTokenFileMagic32)
    TN_THROW(DataError, "token file '", path, "': magic number ", magic, ", expected ",
             kTokenFileMagic16, " or ", kTokenFileMagic32, ": not an llm.c token file (",
             accepted_layouts(), ")");
  const std::optional<TokenWidth> width = width_of(magic, version);
  if (!width)
    TN_THROW(DataError, "token file '", path, "': unsupported version ", version,
             " with magic ", magic, " (", accepted_layouts(), ")");
  const std::int64_t count = header[2];
  if (count < 0)
    TN_THROW(DataError, "token file '", path, "': header gives a negative token count ", count);
  const std::int64_t expected_bytes = kTokenFileHeaderBytes + bytes_per_token(*width) * count;
  if (file_bytes < expected_bytes)
    TN_THROW(DataError, "token file '", path, "': truncated: the header promises ", count,
             " tokens (", expected_bytes, " bytes) but the file has ", file_bytes,
             " bytes; version ", version, " stores ", token_width_name(*width), " tokens");
  if (file_bytes > expected_bytes)
    TN_THROW(DataError, "token file '", path, "': ", file_bytes - expected_bytes,
             " trailing bytes: the header promises ", count, " tokens (", expected_bytes,
             " bytes) but the file has ", file_bytes, " bytes; version ", version, " stores ",
             token_width_name(*width), " tokens");

  // The header is 1024 bytes into a page-aligned mapping, so either width is aligned.
  const char* payload = static_cast<const char*>(mapping) + kTokenFileHeaderBytes;
  if (*width == TokenWidth::U32)
    shard.tokens32_ = reinterpret_cast<const std::uint32_t*>(payload);
  else
    shard.tokens16_ = reinterpret_cast<const std::uint16_t*>(payload);
  shard.size_ = count;
  return shard;
}

TokenShard::TokenShard(std::string path, void* mapping, std::size_t mapping_bytes)
    : path_(std::move(path)), mapping_(mapping), mapping_bytes_(mapping_bytes) {}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      tokens16_(std::exchange(other.tokens16_, nullptr)),
      tokens32_(std::exchange(other.tokens32_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      max_token_(other.max_token_.exchange(-1)) {}

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    tokens16_ = std::exchange(other.tokens16_, nullptr);
    tokens32_ = std::exchange(other.tokens32_, nullptr);
    size_ = std::exchange(other.size_, 0);
    max_token_.store(other.max_token_.exchange(-1));
  }
  return *this;
}

TokenShard::~TokenShard() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

void TokenShard::copy_tokens(std::int64_t first, std::int64_t count, std::int32_t* out) const {
  TN_CHECK(first >= 0 && count >= 0 && first + count <= size_, "tokens [", first, ", ",
           first + count, ") outside the ", size_, " of '", path_, "'");
  if (tokens32_ != nullptr) {
    const std::uint32_t* in = tokens32_ + first;
    for (std::int64_t t = 0; t < count; ++t) out[t] = static_cast<std::int32_t>(in[t]);
  } else {
    const std::uint16_t* in = tokens16_ + first;
    for (std::int64_t t = 0; t < count; ++t) out[t] = in[t];
  }
}

std::uint32_t TokenShard::max_token() const {
  std::int64_t cached = max_token_.load(std::memory_order_relaxed);
  if (cached >= 0) return static_cast<std::uint32_t>(cached);
  std::uint32_t largest = 0;
  if (tokens32_ != nullptr) {
    for (std::int64_t i = 0; i < size_; ++i) largest = std::max(largest, tokens32_[i]);
  } else {
    for (std::int64_t i = 0; i < size_; ++i)
      largest = std::max<std::uint32_t>(largest, tokens16_[i]);
  }
  max_token_.store(largest, std::memory_order_relaxed);
  return largest;
}

namespace {

// Both signed overloads: every token checked before any file is created, so a refusal leaves
// nothing behind.
template <class Token>
void write_checked_tokens(const std::string& path, std::span<const Token> tokens,
                          std::optional<TokenWidth> width) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int64_t token = tokens[i];
    if (token < 0 || token >= kLimit)
      TN_THROW(DataError, "cannot write token file '", path, "': token ", token, " at index ", i,
               " is outside [0, 2^31)");
    largest = std::max(largest, token);
  }
  constexpr std::int64_t kU16Max = std::numeric_limits<std::uint16_t>::max();
  if (width == TokenWidth::U16 && largest > kU16Max)
    TN_THROW(DataError, "cannot write token file '", path, "': token ", largest,
             " does not fit version 1's uint16 tokens (version 7 stores uint32)");
  const TokenWidth chosen =
      width.value_or(largest > kU16Max ? TokenWidth::U32 : TokenWidth::U16);
  const auto count = static_cast<std::int64_t>(tokens.size());
  write_atomically(path, count, chosen, [&](int fd) {
    return chosen == TokenWidth::U32 ? write_converted<std::uint32_t>(fd, tokens)
                                     : write_converted<std::uint16_t>(fd, tokens);
  });
}

}  // namespace

void write_token_file(const std::string& path, std::span<const std::int64_t> tokens,
                      std::optional<TokenWidth> width) {
  write_checked_tokens(path, tokens, width);
}

void write_token_file(const std::string& path, std::span<const std::int32_t> tokens,
                      std::optional<TokenWidth> width) {
  write_checked_tokens(path, tokens, width);
}

void write_token_file(const std::string& path, std::span<const std::uint16_t> tokens,
                      TokenWidth width) {
  const auto count = static_cast<std::int64_t>(tokens.size());
  write_atomically(path, count, width, [&](int fd) {
    return width == TokenWidth::U16 ? write_all(fd, tokens.data(), tokens.size_bytes())
                                    : write_converted<std::uint32_t>(fd, tokens);
  });
}

}  // namespace ternion
