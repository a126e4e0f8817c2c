// The flight recorder: this process's last communication operations, kept so that when a job
// hangs or fails, each rank can say what it was doing (PyTorch's flight recorder, for every
// backend that records into it: the MPI backend does).
//
// A communicator registers itself once (its name and its members as world ranks) and records
// each operation as it is issued: its group, its sequence and its number in it on this rank,
// kind, bytes, peers, and the times it was issued, started and ended, with its state. Each
// group numbers its collectives and its sends and receives apart (c10d's collective_seq_id and
// p2p_seq_id): every member's n-th collective on a group is the same operation, while a middle
// pipeline stage sends and receives twice as often as the first and last. The last kCapacity
// operations are kept (a ring). Writing a record (`dump`) turns them into one JSON file per rank,
// `<dir>/rank_R.json`, which `ternion-hang-report` (parallel/comm/hang_report.h) reads from all
// ranks to say which rank is behind.
//
// Thread-safe; recording is a lock and a few stores (no allocation beyond the entry's strings).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ternion {

enum class FlightState { issued, started, completed, failed };
const char* flight_state_name(FlightState state);

// Which of its group's counters numbers an operation: collectives (every member calls them:
// barrier and split too) or point-to-point sends and receives (send, recv, exchange).
enum class FlightSequence { collective, point_to_point };
const char* flight_sequence_name(FlightSequence sequence);

struct FlightGroup {
  std::string name;          // "dp[0,2]"
  std::vector<int> members;  // world ranks, in group-rank order
  // The operations of each sequence this rank has issued on it, those the ring has dropped
  // too: a group used rarely beside a busy one keeps its count when its entries are gone.
  std::uint64_t collectives = 0, point_to_point = 0;
};

struct FlightEntry {
  std::uint64_t id = 0;      // this process's issue order, from 1
  int group = -1;            // index into the record's groups
  FlightSequence sequence = FlightSequence::collective;
  std::uint64_t seq = 0;     // this rank's n-th operation of `sequence` on the group, from 1
  std::string kind;          // "all_reduce", "send", "exchange", "split", ...
  std::int64_t bytes = 0;
  std::vector<int> peers;    // point to point: the peers' world ranks
  FlightState state = FlightState::issued;
  double issued_s = 0, started_s = -1, ended_s = -1;  // Unix time; -1: not yet
  std::string error;         // state failed: why
};

// What one rank's record holds, as written and read back.
struct FlightRecord {
  int rank = 0, world_size = 1;
  std::string reason;        // why it was written: "timeout ...", "signal", "error"
  double written_s = 0;      // Unix time
  double timeout_s = 0;
  std::vector<FlightGroup> groups;
  std::vector<FlightEntry> entries;  // oldest first
};

class FlightRecorder {
 public:
  static constexpr std::size_t kCapacity = 2048;
  static FlightRecorder& instance();

  // A group's index for its entries (one per communicator).
  int register_group(std::string name, std::vector<int> members);
  // Records an operation issued on `group` (numbered the next of the group's `sequence`) and
  // returns its id for the calls below.
  std::uint64_t issued(int group, FlightSequence sequence, std::string kind, std::int64_t bytes,
                       std::vector<int> peers);
  void started(std::uint64_t id);
  void ended(std::uint64_t id, const std::string& error = {});  // error: failed

  // The oldest operation not yet ended (its id 0 when there is none), for the watchdog.
  FlightEntry oldest_unfinished() const;
  FlightRecord snapshot(int rank, int world_size, std::string reason, double timeout_s) const;
  FlightGroup group(int index) const;  // a copy: groups may be added meanwhile

 private:
  FlightEntry* find(std::uint64_t id);  // null once the ring has dropped it
  mutable std::mutex mutex_;
  std::vector<FlightGroup> groups_;  // with their counts, which number the entries
  std::vector<FlightEntry> ring_ = std::vector<FlightEntry>(kCapacity);
  std::uint64_t next_id_ = 1;
};

// The most ranks a record may name: a job has fewer (parallel/process_groups.cpp numbers
// ranks in floats, exact to 2^24), and the checkpoint index allows the same.
inline constexpr int kMaxFlightRanks = 1 << 24;
// The most seconds a record's times may hold (about the year 33658).
inline constexpr double kMaxFlightSeconds = 1e12;

// The record as JSON, and back (CommError naming the file for one that is not a record, or is
// of another version: the report reads the records of the build that wrote them).
std::string flight_record_json(const FlightRecord& record);
FlightRecord parse_flight_record(const std::string& text, const std::string& path);
// CommError naming `where` and the field for a record no job writes: world_size outside
// [1, kMaxFlightRanks], its rank outside the world, a group with no members, a member twice
// or outside the world, an operation on no group or with a peer outside the world, a time
// that is not finite or past kMaxFlightSeconds.
void check_flight_record(const FlightRecord& record, const std::string& where);
// Writes `record` to `dir`/rank_R.json (through a temporary name); returns the path.
std::string write_flight_record(const std::string& dir, const FlightRecord& record);

double unix_time_now();

}  // namespace ternion
