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
#include <utility>
#include <vector>

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
  // Closes now and reports failure (close can report a deferred write error).
  bool close_checked() {
    int fd = std::exchange(fd_, -1);
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

bool write_all(int fd, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
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
  TokenShard shard(path, mapping, static_cast<std::size_t>(file_bytes), 0);

  std::int32_t header[3];
  std::memcpy(header, mapping, sizeof(header));
  if (header[0] != kTokenFileMagic)
    TN_THROW(DataError, "token file '", path, "': magic number ", header[0], ", expected ",
             kTokenFileMagic, " (not an llm.c token file)");
  if (header[1] != kTokenFileVersion)
    TN_THROW(DataError, "token file '", path, "': unsupported version ", header[1],
             " (this reader handles version ", kTokenFileVersion, ", uint16 tokens)");
  const std::int64_t count = header[2];
  if (count < 0)
    TN_THROW(DataError, "token file '", path, "': header gives a negative token count ", count);
  const std::int64_t expected_bytes = kTokenFileHeaderBytes + 2 * count;
  if (file_bytes < expected_bytes)
    TN_THROW(DataError, "token file '", path, "': truncated: the header promises ", count,
             " tokens (", expected_bytes, " bytes) but the file has ", file_bytes, " bytes");
  if (file_bytes > expected_bytes)
    TN_THROW(DataError, "token file '", path, "': ", file_bytes - expected_bytes,
             " trailing bytes: the header promises ", count, " tokens (", expected_bytes,
             " bytes) but the file has ", file_bytes, " bytes");

  shard.size_ = count;
  return shard;
}

TokenShard::TokenShard(std::string path, void* mapping, std::size_t mapping_bytes,
                       std::int64_t size)
    : path_(std::move(path)),
      mapping_(mapping),
      mapping_bytes_(mapping_bytes),
      tokens_(reinterpret_cast<const std::uint16_t*>(static_cast<const char*>(mapping) +
                                                     kTokenFileHeaderBytes)),
      size_(size) {}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      tokens_(std::exchange(other.tokens_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      max_token_(other.max_token_.exchange(-1)) {}

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    size_ = std::exchange(other.size_, 0);
    max_token_.store(other.max_token_.exchange(-1));
  }
  return *this;
}

TokenShard::~TokenShard() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

std::uint16_t TokenShard::max_token() const {
  std::int32_t cached = max_token_.load(std::memory_order_relaxed);
  if (cached >= 0) return static_cast<std::uint16_t>(cached);
  std::uint16_t largest = 0;
  for (std::int64_t i = 0; i < size_; ++i) largest = std::max(largest, tokens_[i]);
  max_token_.store(largest, std::memory_order_relaxed);
  return largest;
}

void write_token_file(const std::string& path, std::span<const std::uint16_t> tokens) {
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    TN_THROW(DataError, "cannot write token file '", path, "': ", tokens.size(),
             " tokens do not fit the format's int32 token count");

  std::vector<std::int32_t> header(kTokenFileHeaderInts, 0);
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());

  const std::string tmp_path = path + ".tmp." + std::to_string(::getpid());
  FileDescriptor fd(::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    TN_THROW(DataError, "cannot write token file '", path, "': cannot create '", tmp_path,
             "': ", errno_text());
  auto fail = [&](const char* what) {
    std::string reason = errno_text();
    ::unlink(tmp_path.c_str());
    TN_THROW(DataError, "cannot write token file '", path, "': ", what, ": ", reason);
  };
  if (!write_all(fd.get(), header.data(), header.size() * sizeof(std::int32_t)))
    fail("writing the header");
  if (!write_all(fd.get(), tokens.data(), tokens.size_bytes())) fail("writing the tokens");
  // Data on disk before the rename makes it visible: a crash leaves the old file or the new
  // one, never a prefix of the new one under the final name.
  if (::fsync(fd.get()) != 0) fail("fsync");
  if (!fd.close_checked()) fail("close");
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) fail("rename");

  // Make the rename itself durable. Best effort: some filesystems refuse fsync on directories,
  // and by now the file is complete under its final name either way.
  std::string dir = std::filesystem::path(path).parent_path().string();
  FileDescriptor dir_fd(
      ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0) ::fsync(dir_fd.get());
}

}  // namespace ternion
