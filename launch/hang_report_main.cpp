// ternion-hang-report DIR: reads the flight records a hung or failed job's ranks wrote
// (logging.flight_dir) and says which rank the others wait for (parallel/comm/hang_report.h).
// Exit status 0 with a verdict, 1 when the records cannot be read, 2 on a usage error.
#include <cstdio>
#include <exception>
#include <string>

#include "framework/output_path.h"
#include "parallel/comm/hang_report.h"

int main(int argc, char** argv) {
  try {
    if (argc != 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
      std::fprintf(argc == 2 ? stdout : stderr,
                   "usage: ternion-hang-report DIR\n\n"
                   "Reads the flight records (rank_R.json) that a job's ranks wrote to DIR\n"
                   "(logging.flight_dir) on a communication timeout, an error or a signal, and\n"
                   "says what each rank waits in and which rank is behind.\n");
      if (argc != 2) return 2;
      ternion::flush_standard_output();
      return 0;
    }
    const ternion::HangReport report =
        ternion::analyse_flight_records(ternion::read_flight_records(argv[1]));
    for (const std::string& line : report.lines)
      std::printf("ternion-hang-report: %s\n", line.c_str());
    ternion::flush_standard_output();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion-hang-report: error: %s\n", e.what());
    return 1;
  }
}
