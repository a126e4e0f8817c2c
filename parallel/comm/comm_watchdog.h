// The communication watchdog of the MPI backend: a thread that ends a job stuck in
// communication, with one message naming the operation, its group and this rank, after
// writing this rank's flight record (parallel/comm/flight_recorder.h) where every rank's goes,
// so that `ternion-hang-report DIR` can name the rank that is behind.
//
// Once a second (a timed wait, not a poll loop: the step does not pay for it) it looks at the
// oldest operation this process has issued and not seen end. One older than the timeout
// (parallel.comm_timeout_s) ends the job: the message goes to stderr, the record is written,
// and after a short grace, in which the other ranks' watchdogs see that record appear and
// write theirs too, the process exits with status 1, which makes mpirun end every other rank.
// A rank stopped or stuck outside communication writes no record; its absence is what the
// report points at. The record is also written on request (a signal: request_flight_record
// is async-signal-safe) and when an operation fails.
//
// The NCCL backend's own watchdog (parallel/comm/cuda/nccl_communicator.h) uses the same
// timeout for GPU operations.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ternion {

// How often the watchdog looks, and how long after a timeout it lets the other ranks write
// their records before ending the job. A running rank's record therefore shows no wait longer
// than the timeout plus one look; the hang report reads a longer one as a stopped process.
inline constexpr std::chrono::seconds kWatchdogLookInterval{1};
inline constexpr std::chrono::seconds kWatchdogGrace{3};

struct CommWatchdogSettings {
  std::chrono::seconds timeout{600};
  std::string flight_dir;  // where rank_R.json goes; empty: records are not written
  int world_rank = 0, world_size = 1;
};
// Set by the program at start-up (before its first collective of the run), read by the
// watchdog on its next look. Removes this rank's record of an earlier job from the directory.
void configure_comm_watchdog(const CommWatchdogSettings& settings);
CommWatchdogSettings comm_watchdog_settings();

// Asks the watchdog to write this rank's flight record within a second (one atomic store).
void request_flight_record() noexcept;
// Writes it now (an error path about to end the job); returns its path, "" if not written.
std::string write_flight_record_now(const std::string& reason);

class CommWatchdog {
 public:
  CommWatchdog();
  ~CommWatchdog();
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

 private:
  void loop();
  bool another_rank_wrote(const CommWatchdogSettings& settings) const;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool wrote_after_peer_ = false;
  double started_s_;
  std::thread thread_;
};

}  // namespace ternion
