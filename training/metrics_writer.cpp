#include "training/metrics_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "framework/error.h"
#include "framework/logging.h"
#include "framework/strict_json.h"

namespace ternion {

std::string metrics_json(const StepMetrics& m) {
  // JSON has no NaN or Infinity: a non-finite value is written as null.
  OrderedJson j = {{"step", m.step},
                   {"loss", m.loss},
                   {"lr", m.lr},
                   {"grad_norm", m.grad_norm},
                   {"tokens_per_s", m.tokens_per_s},
                   {"tflops_per_rank", m.tflops_per_rank},
                   {"ms_per_step", m.ms_per_step},
                   {"activation_mb", m.activation_mb},
                   {"peak_memory_mb", m.peak_memory_mb},
                   {"reserved_memory_mb", m.reserved_memory_mb}};
  if (m.mfu_percent) j["mfu_percent"] = *m.mfu_percent;
  if (m.memory_estimate_mb) j["memory_estimate_mb"] = *m.memory_estimate_mb;
  j["forward_backward_ms"] = m.forward_backward_ms;
  if (m.forward_ms) j["forward_ms"] = *m.forward_ms;
  j["grad_sync_ms"] = m.grad_sync_ms;
  j["optimizer_ms"] = m.optimizer_ms;
  if (m.grad_reduce_wait_ms > 0 || m.buckets_reduced_early > 0) {
    j["grad_reduce_wait_ms"] = m.grad_reduce_wait_ms;
    j["buckets_reduced_early"] = m.buckets_reduced_early;
  }
  if (m.skipped) j["skipped"] = true;
  if (m.val_loss) j["val_loss"] = *m.val_loss;
  return json_text(j);
}

namespace {

// The step of a metrics line, or -1 for a line that is not one whole record (the last line of
// a run killed while writing it).
std::int64_t step_of_line(const std::string& line) {
  const Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return -1;
  const auto step = record.find("step");
  if (step == record.end()) return -1;
  return json_int64(*step).value_or(-1);
}

// The lines of `source` up to `resumed_step`, and how many later or broken ones it drops.
struct KeptLines {
  std::string source;
  std::string text;
  std::int64_t last_step = 0;  // of the kept lines
  std::int64_t dropped = 0;
};

std::optional<KeptLines> lines_up_to(const std::string& source, std::int64_t resumed_step) {
  if (!std::filesystem::exists(source)) return std::nullopt;
  std::ifstream in(source);
  TN_CHECK_AS(DataError, in.good(), "logging.metrics_file: cannot read '", source, "'");
  KeptLines kept;
  kept.source = source;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const std::int64_t step = step_of_line(line);
    if (step >= 0 && step <= resumed_step) {
      kept.text += line + "\n";
      kept.last_step = std::max(kept.last_step, step);
    } else {
      ++kept.dropped;
    }
  }
  TN_CHECK_AS(DataError, !in.bad(), "logging.metrics_file: cannot read '", source, "'");
  return kept;
}

}  // namespace

MetricsWriter::MetricsWriter(std::string path, std::int64_t resumed_step) : path_(std::move(path)) {
  if (path_.empty()) return;
  namespace fs = std::filesystem;
  fs::path parent = fs::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  partial_path_ = path_ + ".partial";
  const char* mode = "w";
  if (resumed_step > 0) {
    // The newest record that reaches the checkpoint's step: FILE.partial (a run that died after
    // FILE was written) unless it stops short of the step, as when a resume from an older
    // checkpoint died before the step that this run resumes from was reached again.
    std::optional<KeptLines> kept = lines_up_to(partial_path_, resumed_step);
    if (!kept || kept->last_step < resumed_step) {
      std::optional<KeptLines> finished = lines_up_to(path_, resumed_step);
      if (finished && (!kept || finished->last_step > kept->last_step)) kept = finished;
    }
    if (kept) {
      // Written aside and renamed over FILE.partial: a crash now loses none of its lines.
      const std::string rewritten = partial_path_ + ".tmp";
      std::FILE* out = std::fopen(rewritten.c_str(), "w");
      TN_CHECK_AS(ConfigError, out != nullptr, "logging.metrics_file: cannot write '", rewritten,
                  "': ", std::strerror(errno));
      const bool written = std::fwrite(kept->text.data(), 1, kept->text.size(), out) ==
                           kept->text.size();
      const bool closed = std::fclose(out) == 0;
      TN_CHECK_AS(DataError, written && closed, "logging.metrics_file: cannot write '", rewritten,
                  "': ", std::strerror(errno));
      fs::rename(rewritten, partial_path_, ec);
      TN_CHECK_AS(DataError, !ec, "logging.metrics_file: cannot rename '", rewritten, "' to '",
                  partial_path_, "': ", ec.message());
      if (kept->dropped > 0)
        log_info("ternion: logging.metrics_file: kept the lines of steps up to ", resumed_step,
                 " from '", kept->source, "', dropped ", kept->dropped,
                 " of later steps or cut short");
      if (kept->last_step < resumed_step)
        log_info("ternion: logging.metrics_file: '", kept->source, "' has no lines of steps ",
                 kept->last_step + 1, " to ", resumed_step, ": the record has a gap there");
      mode = "a";
    }
  }
  file_ = std::fopen(partial_path_.c_str(), mode);
  TN_CHECK_AS(ConfigError, file_ != nullptr, "logging.metrics_file: cannot write '",
              partial_path_, "': ", std::strerror(errno));
}

// A run that stops on an error keeps its lines in FILE.partial and leaves FILE as it was: the
// rename is finish()'s, on the paths where the run ends (a resume continues the .partial).
MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsWriter::write(const StepMetrics& m) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "%s\n", metrics_json(m).c_str());
  std::fflush(file_);
}

void MetricsWriter::finish() {
  if (file_ == nullptr) return;
  const bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  TN_CHECK_AS(DataError, ok, "cannot finish writing '", partial_path_, "'");
  std::error_code ec;
  std::filesystem::rename(partial_path_, path_, ec);
  TN_CHECK_AS(DataError, !ec, "cannot rename '", partial_path_, "' to '", path_, "': ",
              ec.message());
}

}  // namespace ternion
