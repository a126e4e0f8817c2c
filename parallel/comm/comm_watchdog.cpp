#include "parallel/comm/comm_watchdog.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "framework/logging.h"
#include "parallel/comm/flight_recorder.h"

namespace ternion {

namespace {

std::mutex g_settings_mutex;
CommWatchdogSettings g_settings;
std::atomic<bool> g_record_requested{false};

// "all_reduce #57 on group 'dp[0,2]'", "recv #12 on group 'pp[1,3]' from world rank 3".
std::string describe(const FlightEntry& e) {
  const FlightGroup g = FlightRecorder::instance().group(e.group);
  std::string text = detail::concat(e.kind, " #", e.seq, " on group '", g.name, "'");
  for (std::size_t i = 0; i < e.peers.size(); ++i)
    text += detail::concat(i == 0 ? " with world rank " : ", ", e.peers[i]);
  return text;
}

}  // namespace

void configure_comm_watchdog(const CommWatchdogSettings& settings) {
  // A record left by an earlier job in the same directory would be read as this job's.
  if (!settings.flight_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove(std::filesystem::path(settings.flight_dir) /
                                ("rank_" + std::to_string(settings.world_rank) + ".json"),
                            ignored);
  }
  std::lock_guard lock(g_settings_mutex);
  g_settings = settings;
}

CommWatchdogSettings comm_watchdog_settings() {
  std::lock_guard lock(g_settings_mutex);
  return g_settings;
}

void request_flight_record() noexcept { g_record_requested.store(true); }

namespace {
std::string write_record_with(const CommWatchdogSettings& s, const std::string& reason) {
  if (s.flight_dir.empty()) return "";
  try {
    const FlightRecord record = FlightRecorder::instance().snapshot(
        s.world_rank, s.world_size, reason, static_cast<double>(s.timeout.count()));
    return write_flight_record(s.flight_dir, record);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion: rank %d: could not write the flight record: %s\n",
                 s.world_rank, e.what());
    return "";
  }
}
}  // namespace

std::string write_flight_record_now(const std::string& reason) {
  return write_record_with(comm_watchdog_settings(), reason);
}

CommWatchdog::CommWatchdog() : started_s_(unix_time_now()), thread_([this] { loop(); }) {}

CommWatchdog::~CommWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}


bool CommWatchdog::another_rank_wrote(const CommWatchdogSettings& s) const {
  if (s.flight_dir.empty()) return false;
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(s.flight_dir, ec)) {
    const std::string name = file.path().filename().string();
    if (name.rfind("rank_", 0) != 0 || name == "rank_" + std::to_string(s.world_rank) + ".json")
      continue;
    const auto written = std::filesystem::last_write_time(file.path(), ec);
    if (ec) continue;
    // file_clock to seconds since the epoch, through the difference from now.
    const double age = std::chrono::duration<double>(
                           std::filesystem::file_time_type::clock::now() - written).count();
    if (unix_time_now() - age > started_s_) return true;
  }
  return false;
}

void CommWatchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, kWatchdogLookInterval, [&] { return stopping_; })) {
    const CommWatchdogSettings s = comm_watchdog_settings();
    if (g_record_requested.exchange(false))
      write_record_with(s, "requested (a signal or an error)");
    if (!wrote_after_peer_ && another_rank_wrote(s)) {
      wrote_after_peer_ = true;
      write_record_with(s, "another rank's record appeared");
    }
    const FlightEntry oldest = FlightRecorder::instance().oldest_unfinished();
    if (oldest.id == 0) continue;
    const double waited = unix_time_now() - oldest.issued_s;
    if (waited < static_cast<double>(s.timeout.count())) continue;
    const std::string what = describe(oldest);
    const std::string path = write_record_with(s, "timeout: " + what);
    std::fprintf(stderr,
                 "ternion: rank %d: communication timed out: %s has not completed after %.0f s "
                 "(parallel.comm_timeout_s = %lld); this rank's flight record is %s, and "
                 "`ternion-hang-report %s` reads every rank's to name the one that is behind\n",
                 s.world_rank, what.c_str(), waited, static_cast<long long>(s.timeout.count()),
                 path.empty() ? "not written" : path.c_str(),
                 s.flight_dir.empty() ? "DIR" : s.flight_dir.c_str());
    std::fflush(stderr);
    lock.unlock();
    std::this_thread::sleep_for(kWatchdogGrace);
    std::_Exit(1);  // mpirun ends the other ranks when one exits non-zero
  }
}

}  // namespace ternion
