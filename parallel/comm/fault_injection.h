// A fault for tests: TERNION_INJECT_COMM_ERROR=RANK:KIND:N makes world rank RANK fail its N-th
// communication operation of kind KIND (all_reduce, send, recv, reduce_scatter, ...: the kinds
// of the flight record, counted over all the rank's groups from 1) as MPI would fail it, so
// that a test can check how a job ends when one rank raises an error inside a collective
// region while the others wait in it. Unset (as in every real run) it costs one branch.
#pragma once

#include <string_view>

namespace ternion {

inline constexpr const char* kInjectCommErrorVariable = "TERNION_INJECT_COMM_ERROR";

// True when this operation is the one to fail. A malformed variable is a ConfigError naming it.
bool inject_comm_error(int world_rank, std::string_view kind);
// Reads the variable now, so that a malformed one is refused at start-up, before any collective.
void check_comm_fault_injection();

}  // namespace ternion
