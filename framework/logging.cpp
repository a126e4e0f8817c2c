#include "framework/logging.h"

#include <cstdio>

namespace ternion {

namespace {
LogState g_log_state;
}

void set_log_rank(int rank, int world_size) { g_log_state = {rank, world_size}; }
const LogState& log_state() { return g_log_state; }

namespace {
// The whole line, NUL bytes included (a byte-level sample may hold them), then a newline.
void write_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}
}  // namespace

void log_line(const std::string& line) {
  if (g_log_state.world_size > 1) std::printf("[rank %d] ", g_log_state.rank);
  write_line(line);
}

void log_rank0(const std::string& line) {
  if (g_log_state.rank == 0) write_line(line);
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 5) {
    bytes /= 1000.0;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return out;
}

std::string count_of(std::int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string human_count(double n) {
  char out[32];
  if (n >= 1e9) std::snprintf(out, sizeof out, "%.2fB", n / 1e9);
  else if (n >= 1e6) std::snprintf(out, sizeof out, "%.2fM", n / 1e6);
  else if (n >= 1e3) std::snprintf(out, sizeof out, "%.1fK", n / 1e3);
  else std::snprintf(out, sizeof out, "%.0f", n);
  return out;
}

}  // namespace ternion
