// Logging: one process-wide rank (set once at start-up) prefixes messages in multi-rank runs.
#pragma once

#include <cstdint>
#include <string>

#include "framework/error.h"

namespace ternion {

struct LogState {
  int rank = 0;
  int world_size = 1;
};
void set_log_rank(int rank, int world_size);
const LogState& log_state();

void log_line(const std::string& line);  // printed by every rank, prefixed in multi-rank runs
void log_rank0(const std::string& line);  // printed by rank 0 only

template <class... Args>
void log_info(const Args&... args) {
  log_rank0(detail::concat(args...));
}

// Sizes for people: "25.3 GB", "351.7 KB" (decimal units); "124.44M", "1.24B" (elements).
std::string human_bytes(double bytes);
std::string human_count(double n);
// "1 micro-batch", "2 micro-batches".
std::string count_of(std::int64_t n, const char* one, const char* many);

}  // namespace ternion
