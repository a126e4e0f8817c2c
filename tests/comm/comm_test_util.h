// Helpers for the communicator tests: per-rank inputs that every rank can regenerate (so
// each rank computes the expected result of a collective on its own), typed tensors, and a
// check that an error is a CommError naming what it should.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "framework/error.h"
#include "framework/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/comm/mpi_runtime.h"
#include "test_util.h"

namespace ternion::test {

// What MpiRuntime reported in main before MPI_Init (checked by mpi_runtime_test.cpp).
struct RuntimeFacts {
  bool initialized = true;
  int world_rank = -1;
  int world_size = -1;
};
inline RuntimeFacts facts_before_init;

// Sizes every collective test runs: empty, one element, fewer elements than ranks, a size that
// does not divide by the group, and a large one (smaller when 8 ranks share 2 cores).
inline std::vector<std::int64_t> test_sizes(int group_size) {
  const std::int64_t large = group_size <= 4 ? (std::int64_t{1} << 20) : (std::int64_t{1} << 17);
  return {0, 1, 3, 5 * group_size + 3, 1000, large};
}

template <class T>
Tensor tensor_of(const std::vector<T>& values, DType dtype = dtype_of<T>()) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, dtype);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> values_of(const Tensor& t) {
  EXPECT_EQ(t.nbytes(), static_cast<std::size_t>(t.numel()) * sizeof(T)) << t.str();
  std::vector<T> values(static_cast<std::size_t>(t.numel()));
  if (!values.empty()) std::memcpy(values.data(), t.raw_data(), t.nbytes());
  return values;
}

// Rank `rank`'s input of test `seed`: integers in [-1024, 1024) ([0, 1024) for unsigned types),
// so that sums over up to 8 ranks, averages and maxima are exact in every element type,
// whatever order MPI combines them in; results are then compared exactly.
template <class T>
std::vector<T> rank_input(std::int64_t n, int rank, std::uint64_t seed) {
  const std::int32_t lo = std::is_unsigned_v<T> ? 0 : -1024;
  return convert<T>(random_ints(static_cast<std::size_t>(n),
                                seed * 7919 + static_cast<std::uint64_t>(rank), lo, 1024));
}

// The expected result of reducing every rank's rank_input, computed here from the inputs.
template <class T>
std::vector<T> reduced_inputs(std::int64_t n, int size, ReduceOp op, std::uint64_t seed) {
  std::vector<double> acc(static_cast<std::size_t>(n), op == ReduceOp::Max ? -1e30 : 0.0);
  for (int r = 0; r < size; ++r) {
    const std::vector<T> input = rank_input<T>(n, r, seed);
    for (std::size_t i = 0; i < acc.size(); ++i) {
      const double v = static_cast<double>(input[i]);
      acc[i] = op == ReduceOp::Max ? std::max(acc[i], v) : acc[i] + v;
    }
  }
  std::vector<T> out(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const T sum = static_cast<T>(acc[i]);  // exact: |sum| < 2^24
    out[i] = op == ReduceOp::Average ? static_cast<T>(sum / static_cast<T>(size)) : sum;
  }
  return out;
}

inline std::string op_label(ReduceOp op) {
  return op == ReduceOp::Sum ? "sum" : op == ReduceOp::Average ? "average" : "max";
}

// Passes when `call` throws CommError whose message contains every one of `parts`.
template <class F>
::testing::AssertionResult throws_comm_error(F&& call,
                                             std::initializer_list<std::string_view> parts) {
  try {
    call();
  } catch (const CommError& e) {
    const std::string message = e.what();
    for (std::string_view part : parts)
      if (message.find(part) == std::string::npos)
        return ::testing::AssertionFailure()
               << "CommError \"" << message << "\" does not mention \"" << part << "\"";
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw something else than CommError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace ternion::test
