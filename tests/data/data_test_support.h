// Helpers shared by the data tests: a scratch directory, raw file writing, and checks that
// print what differs.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/token_shard.h"
#include "framework/error.h"
#include "framework/tensor.h"

namespace ternion::test {

// A fresh directory under /tmp, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/ternion-data-test-XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A shard of n tokens whose token i is base + i, so every token says where it came from.
inline void write_counting(const TempDir& dir, const std::string& name, std::int64_t n,
                           std::int64_t base) {
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = base + i;
  write_token_file(dir.file(name), tokens, TokenWidth::U32);
}

inline void write_raw_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

inline std::string read_raw_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `body`, expecting it to throw exactly E (or a subclass) with every string of `parts`
// in its message.
template <class E>
void expect_error(const std::string& label, const std::function<void()>& body,
                  const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << label << ": no exception thrown";
  } catch (const E& e) {
    std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << label << ": message is not one line: "
                                                     << message;
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
          << label << ": message lacks '" << part << "': " << message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << ": wrong exception type: " << e.what();
  }
}

// Compares two integer sequences element by element, printing the label, the first mismatch,
// the max absolute difference and the relative error on failure.
inline void expect_same_ints(const std::string& label, const std::vector<std::int64_t>& actual,
                             const std::vector<std::int64_t>& expected) {
  ASSERT_EQ(actual.size(), expected.size()) << label << ": sizes differ";
  double max_diff = 0, max_ref = 0;
  std::int64_t first_bad = -1;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    double diff = std::fabs(static_cast<double>(actual[i] - expected[i]));
    if (diff > 0 && first_bad < 0) first_bad = static_cast<std::int64_t>(i);
    max_diff = std::max(max_diff, diff);
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(expected[i])));
  }
  EXPECT_EQ(max_diff, 0.0) << label << ": max abs diff " << max_diff << ", rel error "
                           << max_diff / std::max(max_ref, 1.0) << ", first mismatch at "
                           << first_bad << " (got " << actual[static_cast<std::size_t>(
                                  std::max<std::int64_t>(first_bad, 0))]
                           << ", expected "
                           << expected[static_cast<std::size_t>(
                                  std::max<std::int64_t>(first_bad, 0))]
                           << ")";
}

inline std::vector<std::int64_t> ints_of(const Tensor& t) {
  const std::int32_t* p = t.data<std::int32_t>();
  return std::vector<std::int64_t>(p, p + t.numel());
}

}  // namespace ternion::test
