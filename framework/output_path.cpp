#include "framework/output_path.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "framework/error.h"

namespace ternion {

std::string why_not_replaceable(const std::string& path, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) return "";
  if (fs::is_directory(status)) return "'" + path + "' is a directory";
  if (!fs::is_regular_file(status))
    return "'" + path + "' is not a regular file (a FIFO or a device): writing would replace it";
  for (const std::string& input : inputs)
    if (fs::equivalent(path, input, ec))
      return "'" + path + "' is " + (path == input ? "" : "'" + input + "', ") +
             "a file this program reads: writing would replace it";
  return "";
}

void flush_standard_output() {
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  // The failed write's errno: called once the output is written, nothing has failed since.
  const int error = errno;
  if (flushed && std::cout && std::ferror(stdout) == 0) return;
  TN_THROW(DataError, "cannot write the output to standard output",
           error != 0 ? std::string(": ") + std::strerror(error) : std::string());
}

}  // namespace ternion
