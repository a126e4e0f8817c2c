// Helpers shared by the test programs: reproducible random data, comparisons that report the
// label, the maximum absolute difference and the maximum relative error on failure, and
// central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "framework/tensor.h"

namespace ternion::test {

// n values uniform in [lo, hi), the same for the same seed on every platform's std::mt19937_64
// (the distribution is applied by hand: std::uniform_real_distribution is implementation-defined).
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 engine(seed);
  std::vector<float> values(n);
  for (float& v : values) {
    const double unit = static_cast<double>(engine() >> 11) * (1.0 / 9007199254740992.0);
    v = static_cast<float>(lo + (hi - lo) * unit);
  }
  return values;
}

// n integers uniform in [lo, hi).
inline std::vector<std::int32_t> random_ints(std::size_t n, std::uint64_t seed, std::int32_t lo,
                                             std::int32_t hi) {
  std::mt19937_64 engine(seed);
  std::vector<std::int32_t> values(n);
  const auto span = static_cast<std::uint64_t>(hi - lo);
  for (std::int32_t& v : values) v = lo + static_cast<std::int32_t>(engine() % span);
  return values;
}

// A CPU i32 tensor holding `values` (token ids, targets).
inline Tensor i32_tensor(const std::vector<std::int32_t>& values, const Shape& shape) {
  TN_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape), values.size(),
           " values for shape ", shape_str(shape));
  Tensor t = Tensor::empty(shape, DType::I32);
  if (!values.empty())
    std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(std::int32_t));
  return t;
}

template <class To, class From>
std::vector<To> convert(const std::vector<From>& values) {
  return std::vector<To>(values.begin(), values.end());
}

template <class A, class B>
double dot(const std::vector<A>& a, const std::vector<B>& b) {
  TN_CHECK(a.size() == b.size(), "dot of ", a.size(), " and ", b.size(), " values");
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

// Passes when every element satisfies |got - want| <= atol + rtol * |want| (NaN never does).
// On failure prints the label, the maximum absolute difference, the maximum relative error,
// the worst element and how many elements are out of tolerance.
template <class Got, class Want>
::testing::AssertionResult close_to(std::string_view label, const Got& got, const Want& want,
                                    double atol, double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << label << ": size " << got.size() << " != expected " << want.size();
  double max_abs = 0, max_rel = 0, worst_excess = -1;
  std::size_t worst = 0, n_bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double diff = std::fabs(g - w);
    const double allowed = atol + rtol * std::fabs(w);
    const bool ok = diff <= allowed;  // false for NaN
    const double d = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff;
    max_abs = std::max(max_abs, d);
    if (w != 0 || d != 0) max_rel = std::max(max_rel, d / std::max(std::fabs(w), 1e-300));
    if (!ok) {
      ++n_bad;
      if (d - allowed > worst_excess) {
        worst_excess = d - allowed;
        worst = i;
      }
    }
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << label << ": max abs diff " << max_abs << ", max rel err " << max_rel << "; " << n_bad
         << " of " << got.size() << " elements outside atol " << atol << " + rtol " << rtol
         << " * |want|; worst [" << worst << "] got " << static_cast<double>(got[worst]) << " want "
         << static_cast<double>(want[worst]);
}

template <class Got, class Want>
void expect_close(std::string_view label, const Got& got, const Want& want, double atol,
                  double rtol) {
  EXPECT_TRUE(close_to(label, got, want, atol, rtol));
}

// Bit-for-bit equality of two vectors of the same trivially copyable type.
template <class T>
::testing::AssertionResult bitwise_equal(std::string_view label, const std::vector<T>& a,
                                         const std::vector<T>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << label << ": size " << a.size() << " != " << b.size();
  std::size_t n_diff = 0, first = 0;
  double max_abs = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      if (n_diff++ == 0) first = i;
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    }
  }
  if (n_diff == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << label << ": " << n_diff << " of " << a.size()
         << " elements differ in their bits, max abs diff " << max_abs << ", first [" << first
         << "] " << static_cast<double>(a[first]) << " vs " << static_cast<double>(b[first]);
}

template <class T>
void expect_bitwise_equal(std::string_view label, const std::vector<T>& a,
                          const std::vector<T>& b) {
  EXPECT_TRUE(bitwise_equal(label, a, b));
}

// d loss / d x[i] for every i by central differences (loss(x + h e_i) - loss(x - h e_i)) / 2h.
// `loss` reads x, which is perturbed in place and restored.
inline std::vector<double> finite_difference_gradient(std::vector<double>& x,
                                                      const std::function<double()>& loss,
                                                      double step = 1e-5) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double up = loss();
    x[i] = saved - step;
    const double down = loss();
    x[i] = saved;
    grad[i] = (up - down) / (2 * step);
  }
  return grad;
}

}  // namespace ternion::test
