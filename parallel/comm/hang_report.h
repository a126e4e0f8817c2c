// Reads every rank's flight record (parallel/comm/flight_recorder.h) and says which rank the
// others wait for: `ternion-hang-report DIR`.
//
// Each record's oldest unfinished operation is what that rank waits in. In a collective, the
// n-th operation on a group is the same on every member, so a member whose record shows fewer
// than n operations on that group has not reached it: it is behind. A point-to-point
// operation waits for its peers: a peer with nothing unfinished on that group is not
// answering. A rank with no record at all wrote none: stopped, killed, or stuck outside
// communication (its watchdog only writes when it waits itself or sees another's record).
// The ranks named at the end are those waited for that do not wait themselves (or wrote
// nothing); in a cycle, every rank of it. A rank that failed (its record written on an error,
// or an operation of its record failed) is named first, with the error: what the others wait
// for is then the job's end.
#pragma once

#include <string>
#include <vector>

#include "parallel/comm/flight_recorder.h"

namespace ternion {

struct HangReport {
  std::vector<std::string> lines;  // what each waiting rank waits for, then the verdict
  std::vector<int> behind;         // the ranks named at the end, ascending
  std::vector<int> failed;         // ranks whose record an error wrote, ascending
};

HangReport analyse_flight_records(const std::vector<FlightRecord>& records);

// Every rank_R.json in `dir`; CommError naming the directory when there is none, or naming
// the file that is not a record.
std::vector<FlightRecord> read_flight_records(const std::string& dir);

}  // namespace ternion
