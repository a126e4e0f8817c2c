#include "data/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "framework/error.h"

namespace ternion {

bool write_all(int fd, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

void write_file_atomically(const std::string& path, const char* kind,
                           const std::function<bool(int fd)>& write_payload) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    TN_THROW(DataError, "cannot write ", kind, " '", path, "': cannot create '", temporary,
             "': ", std::strerror(errno));
  const auto fail = [&](const char* step) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(temporary.c_str());
    TN_THROW(DataError, "cannot write ", kind, " '", path, "': ", step, ": ", reason);
  };
  if (!write_payload(fd)) fail("write");
  // Data on disk before the rename makes it visible: a crash leaves the old file or the new
  // one, never a prefix of the new one under the final name.
  if (::fsync(fd) != 0) fail("fsync");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("close");
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("rename");
  // The rename made durable. Best effort: some filesystems refuse fsync on directories, and
  // the file is complete under its final name either way.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace ternion
