// Log lines go out whole: a sample of a byte-level model may hold NUL bytes, which a C-string
// print would cut the line at.
#include "framework/logging.h"

#include <gtest/gtest.h>

#include <string>

namespace ternion {
namespace {

TEST(Logging, LinesKeepTheirNulBytes) {
  const std::string line = std::string("sample:\nab") + '\0' + "cd";
  testing::internal::CaptureStdout();
  log_info(line);
  log_line(line);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, line + "\n" + line + "\n");
}

TEST(Logging, SizesAndCountsReadAsPeopleWrite) {
  EXPECT_EQ(human_bytes(999), "999 B");
  EXPECT_EQ(human_bytes(25.3e9), "25.3 GB");
  EXPECT_EQ(count_of(1, "micro-batch", "micro-batches"), "1 micro-batch");
  EXPECT_EQ(count_of(2, "micro-batch", "micro-batches"), "2 micro-batches");
}

}  // namespace
}  // namespace ternion
