#include "training/metrics_writer.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "framework/error.h"

namespace ternion {

namespace {
std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";  // JSON has no NaN or Infinity
  std::ostringstream out;
  out.precision(9);
  out << x;
  return out.str();
}
}  // namespace

std::string metrics_json(const StepMetrics& m) {
  std::string s = "{\"step\": " + std::to_string(m.step) + ", \"loss\": " + json_number(m.loss) +
                  ", \"lr\": " + json_number(m.lr) + ", \"grad_norm\": " +
                  json_number(m.grad_norm) + ", \"tokens_per_s\": " + json_number(m.tokens_per_s) +
                  ", \"ms_per_step\": " + json_number(m.ms_per_step) +
                  ", \"activation_mb\": " + json_number(m.activation_mb) +
                  ", \"peak_memory_mb\": " + json_number(m.peak_memory_mb) +
                  ", \"reserved_memory_mb\": " + json_number(m.reserved_memory_mb) +
                  ", \"forward_backward_ms\": " + json_number(m.forward_backward_ms);
  if (m.forward_ms) s += ", \"forward_ms\": " + json_number(*m.forward_ms);
  s += ", \"grad_sync_ms\": " + json_number(m.grad_sync_ms) +
       ", \"optimizer_ms\": " + json_number(m.optimizer_ms);
  if (m.grad_reduce_wait_ms > 0 || m.buckets_reduced_early > 0)
    s += ", \"grad_reduce_wait_ms\": " + json_number(m.grad_reduce_wait_ms) +
         ", \"buckets_reduced_early\": " + std::to_string(m.buckets_reduced_early);
  if (m.skipped) s += ", \"skipped\": true";
  if (m.val_loss) s += ", \"val_loss\": " + json_number(*m.val_loss);
  return s + "}";
}

MetricsWriter::MetricsWriter(std::string path, bool append) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  partial_path_ = path_ + ".partial";
  const char* mode = "w";
  if (append && std::filesystem::exists(path_) &&
      std::filesystem::copy_file(path_, partial_path_,
                                 std::filesystem::copy_options::overwrite_existing, ec))
    mode = "a";
  file_ = std::fopen(partial_path_.c_str(), mode);
  TN_CHECK_AS(ConfigError, file_ != nullptr, "logging.metrics_file: cannot write '",
              partial_path_, "': ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  try {
    finish();
  } catch (...) {
    // Destructors never throw; finish() is called explicitly on the normal path.
  }
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
