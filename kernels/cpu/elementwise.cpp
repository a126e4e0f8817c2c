// Elementwise helpers. sum_of_squares is a reduction whose result must not depend on the
// thread count: it sums fixed-size chunks (each in double, in a fixed vector order) and then
// the chunk sums in order, so only the chunk size, never the thread count, shapes the rounding.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion::cpu {

namespace {
constexpr i64 kMinParallelElements = 1 << 15;
constexpr i64 kReductionChunk = 1 << 14;
}  // namespace

template <class T>
void add(T* out, const T* a, const T* b, i64 n) {
  // out may alias a or b: element i is read before it is written.
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
void accumulate(T* out, const T* x, i64 n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) out[i] += x[i];
}

template <class T>
void scale(T* x, T factor, i64 n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) x[i] *= factor;
}

template <class T>
double sum_of_squares(const T* x, i64 n) {
  const i64 n_chunks = (n + kReductionChunk - 1) / kReductionChunk;
  std::vector<double> chunk_sums(static_cast<std::size_t>(n_chunks));
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (i64 chunk = 0; chunk < n_chunks; ++chunk) {
    const i64 begin = chunk * kReductionChunk;
    const i64 end = begin + kReductionChunk < n ? begin + kReductionChunk : n;
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (i64 i = begin; i < end; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    chunk_sums[static_cast<std::size_t>(chunk)] = sum;
  }
  double total = 0;
  for (double s : chunk_sums) total += s;
  return total;
}

template <class T>
bool all_finite(const T* x, i64 n) {
  int finite = 1;
#pragma omp parallel for simd schedule(static) reduction(& : finite) if (n >= kMinParallelElements)
  for (i64 i = 0; i < n; ++i) finite &= std::isfinite(x[i]) ? 1 : 0;
  return finite != 0;
}

template void add<float>(float*, const float*, const float*, i64);
template void add<double>(double*, const double*, const double*, i64);
template void accumulate<float>(float*, const float*, i64);
template void accumulate<double>(double*, const double*, i64);
template void scale<float>(float*, float, i64);
template void scale<double>(double*, double, i64);
template double sum_of_squares<float>(const float*, i64);
template double sum_of_squares<double>(const double*, i64);
template bool all_finite<float>(const float*, i64);
template bool all_finite<double>(const double*, i64);

}  // namespace ternion::cpu
