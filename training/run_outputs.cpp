#include "training/run_outputs.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "framework/error.h"
#include "framework/output_path.h"
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

void check_outputs_writable(const TrainConfig& config, int rank,
                            const std::vector<std::string>& data_files) {
  check_save_dir_writable(config, rank);
  // The files the run reads, which rank 0's output files must not be: its data, its config,
  // its tokenizer, and the files of the checkpoint it resumes from and of the weights it
  // starts from.
  std::vector<std::string> inputs;
  const bool writes_files =
      !config.logging.metrics_file.empty() || !config.logging.trace_file.empty();
  if (rank == 0 && writes_files) {
    inputs = data_files;
    for (const std::string& file : {config.source, config.data.tokenizer})
      if (!file.empty()) inputs.push_back(file);
    std::string resumed;
    try {
      if (!config.checkpoint.load.empty())
        resumed = resolve_checkpoint(config.checkpoint.load, config.checkpoint.save_dir);
    } catch (const CheckpointError&) {
      // None yet, or none there: the run says so when it resumes.
    }
    for (const std::string& dir : {resumed, config.model.init_from})
      if (!dir.empty())
        for (const std::string& file : checkpoint_files(dir)) inputs.push_back(file);
  }
  const std::string where = config.source.empty() ? "" : config.source + ": ";
  // A file the run reads (under any name), a FIFO or a device would be replaced when the run
  // ends.
  auto check = [&](const char* key, const std::string& path, bool directory) {
    if (path.empty()) return;
    std::string why = why_unwritable(path, directory);
    if (why.empty() && !directory) why = why_not_replaceable(path, inputs);
    TN_CHECK_AS(ConfigError, why.empty(), where, key, ": ", why);
  };
  if (rank == 0) {
    check("logging.metrics_file", config.logging.metrics_file, false);
    check("logging.trace_file", config.logging.trace_file, false);
    // Each is written as FILE.partial, then renamed: the names of either may be neither's.
    const std::string& metrics = config.logging.metrics_file;
    const std::string& trace = config.logging.trace_file;
    if (!metrics.empty() && !trace.empty()) {
      std::error_code ec;
      auto resolved = [&](const std::string& path) {
        return fs::weakly_canonical(fs::absolute(path, ec), ec);
      };
      const fs::path m = resolved(metrics), t = resolved(trace);
      const fs::path m_partial = resolved(metrics + ".partial");
      const fs::path t_partial = resolved(trace + ".partial");
      TN_CHECK_AS(ConfigError, m != t && m != t_partial && t != m_partial, where,
                  "logging.trace_file: ", quoted(fs::path(trace)), " and logging.metrics_file ",
                  quoted(fs::path(metrics)),
                  " name the same file (or one the other's temporary FILE.partial): one would "
                  "replace the other");
    }
  }
  // The flight recorder writes when a run fails: too late to find out then.
  check(config.logging.flight_dir.empty() ? "logging.flight_dir (unset: beside the metrics file)"
                                          : "logging.flight_dir",
        config.logging.flight_directory(), true);
}

}  // namespace ternion
