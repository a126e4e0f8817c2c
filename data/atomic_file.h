// Writing a data file so that a reader never sees half of it: the bytes go to
// `path.tmp.<pid>`, are fsynced, and the file is renamed into place (then its directory
// fsynced, best effort). Token files and tokenizer.json are written this way.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace ternion {

// `write_payload(fd)` writes the content and returns false on failure (errno set). Any failure
// removes the temporary file and throws DataError "cannot write <kind> '<path>': <step>: <why>".
void write_file_atomically(const std::string& path, const char* kind,
                           const std::function<bool(int fd)>& write_payload);

// All `bytes`, retrying short writes and EINTR; false on an error (errno set).
bool write_all(int fd, const void* data, std::size_t bytes);

}  // namespace ternion
