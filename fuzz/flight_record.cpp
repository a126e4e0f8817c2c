// A flight record, as ternion-hang-report reads one from a directory a failed run left:
// parsed, then analysed with a second rank's record so the report's indexing runs too.
#include <string>

#include "fuzz/fuzz_input.h"
#include "parallel/comm/hang_report.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ternion::fuzz::accepts_or_refuses([&] {
    const ternion::FlightRecord record = ternion::parse_flight_record(text, "rank_0.json");
    ternion::FlightRecord other = record;
    other.rank = record.rank + 1 < record.world_size ? record.rank + 1 : 0;
    (void)ternion::analyse_flight_records({record, other});
  });
  return 0;
}
