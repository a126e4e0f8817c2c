#include "framework/logging.h"

#include <cstdio>

namespace ternion {

namespace {
LogState g_log_state;
}

void set_log_rank(int rank, int world_size) { g_log_state = {rank, world_size}; }
const LogState& log_state() { return g_log_state; }

void log_line(const std::string& line) {
  if (g_log_state.world_size > 1) {
    std::printf("[rank %d] %s\n", g_log_state.rank, line.c_str());
  } else {
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

void log_rank0(const std::string& line) {
  if (g_log_state.rank != 0) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace ternion
