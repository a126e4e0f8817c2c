#include "parallel/comm/fault_injection.h"

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

#include "framework/error.h"

namespace ternion {
namespace {

struct InjectedFault {
  bool armed = false;
  int rank = -1;
  std::string kind;
  std::int64_t nth = 0;
  std::atomic<std::int64_t> seen{0};
};

bool parse_number(std::string_view text, auto& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

InjectedFault& injected_fault() {
  static InjectedFault fault;
  static std::once_flag parsed;
  std::call_once(parsed, [] {
    const char* text = std::getenv(kInjectCommErrorVariable);
    if (text == nullptr || text[0] == '\0') return;
    const std::string_view spec(text);
    const std::size_t first = spec.find(':'), last = spec.rfind(':');
    const bool ok = first != std::string_view::npos && last > first + 1 &&
                    parse_number(spec.substr(0, first), fault.rank) && fault.rank >= 0 &&
                    parse_number(spec.substr(last + 1), fault.nth) && fault.nth >= 1;
    TN_CHECK_AS(ConfigError, ok, kInjectCommErrorVariable,
                " must be RANK:KIND:N (world rank, operation kind, its N-th operation from 1), "
                "got '", spec, "'");
    fault.kind = std::string(spec.substr(first + 1, last - first - 1));
    fault.armed = true;
  });
  return fault;
}

}  // namespace

void check_comm_fault_injection() { injected_fault(); }

bool inject_comm_error(int world_rank, std::string_view kind) {
  InjectedFault& fault = injected_fault();
  if (!fault.armed || world_rank != fault.rank || kind != fault.kind) return false;
  return fault.seen.fetch_add(1, std::memory_order_relaxed) + 1 == fault.nth;
}

}  // namespace ternion
