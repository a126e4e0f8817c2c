#include "training/run_outputs.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "framework/error.h"
#include "training/checkpoint.h"

namespace ternion {

namespace {

namespace fs = std::filesystem;

// `path` in quotes, built by appending (GCC 12 warns falsely on `"'" + path.string()`).
std::string quoted(const fs::path& path) {
  std::string text = "'";
  text += path.string();
  text += "'";
  return text;
}

// Why `path` cannot be written as a file (or, with `directory`, made a directory and written
// into): an entry of the other kind there, or a nearest existing ancestor that is not a
// directory this process may create entries in. Empty where it can. Creates nothing.
std::string why_unwritable(const fs::path& path, bool directory) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::exists(status)) {
    if (directory != fs::is_directory(status))
      return quoted(path) + (directory ? " is not a directory" : " is a directory");
    return ::access(path.c_str(), W_OK) == 0 ? "" : quoted(path) + " is not writable";
  }
  fs::path ancestor = path.parent_path();
  while (!ancestor.empty() && !fs::exists(ancestor, ec)) ancestor = ancestor.parent_path();
  if (ancestor.empty()) ancestor = ".";
  if (!fs::is_directory(ancestor, ec))
    return quoted(ancestor) + " is not a directory, so " + quoted(path) + " cannot be made";
  if (::access(ancestor.c_str(), W_OK | X_OK) != 0)
    return "cannot create " + quoted(path) + ": " + quoted(ancestor) + " is not writable";
  return "";
}

}  // namespace

void check_outputs_writable(const TrainConfig& config, int rank) {
  check_save_dir_writable(config, rank);
  auto check = [&](const char* key, const std::string& path, bool directory) {
    if (path.empty()) return;
    const std::string why = why_unwritable(path, directory);
    TN_CHECK_AS(ConfigError, why.empty(), config.source.empty() ? "" : config.source + ": ", key,
                ": ", why);
  };
  if (rank == 0) {
    check("logging.metrics_file", config.logging.metrics_file, false);
    check("logging.trace_file", config.logging.trace_file, false);
  }
  // The flight recorder writes when a run fails: too late to find out then.
  check(config.logging.flight_dir.empty() ? "logging.flight_dir (unset: beside the metrics file)"
                                          : "logging.flight_dir",
        config.logging.flight_directory(), true);
}

}  // namespace ternion
