// Reads every rank's flight record (parallel/comm/flight_recorder.h) and says which rank the
// others wait for: `ternion-hang-report DIR`.
//
// Each record's oldest unfinished operation is what that rank waits in. Collectives are
// numbered apart from sends and receives (flight_recorder.h), so the n-th collective on a group
// is the same on every member, and a member whose record shows fewer than n collectives on that
// group has not reached it: it is behind. A send or receive has no such number in common (a
// middle pipeline stage does twice as many as the ends); it is matched by its peer: a peer with
// no send or receive with this rank unfinished on that group is not answering. A rank with no
// record at all wrote none: stopped, killed, or stuck outside communication (its watchdog only
// writes when it waits itself or sees another's record). The ranks named at the end are those
// waited for that do not wait themselves (or wrote nothing); in a cycle, every rank of it. A rank
// that failed (its record written on an error, or an operation of its record failed) is named
// first, with the error: what the others wait for is then the job's end.
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
