// Softmax cross-entropy, one row per task. A row is read twice in the forward (max, then the
// sum of exponentials shifted by it, so nothing overflows) and once in the backward, which
// recomputes the softmax from the saved logsumexp instead of storing it.
#include <cmath>
#include <limits>

#include "framework/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vector_math.h"

namespace ternion::cpu {

namespace {

constexpr i64 kMinParallelElements = 1 << 14;

// A target outside the vocabulary is a broken data file, not a kernel bug; say so before the
// parallel loop, where an exception could not escape.
void check_targets(const std::int32_t* targets, i64 rows, i64 vocab_size,
                   std::int32_t ignore_index) {
  for (i64 r = 0; r < rows; ++r) {
    const std::int32_t t = targets[r];
    if (t != ignore_index && (t < 0 || t >= vocab_size))
      TN_THROW(DataError, "cross_entropy: target ", t, " of row ", r,
               " is outside the vocabulary [0, ", vocab_size, ")");
  }
}

}  // namespace

template <class T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const std::int32_t* targets,
                           i64 rows, i64 padded_vocab, i64 vocab_size, std::int32_t ignore_index) {
  check_targets(targets, rows, vocab_size, ignore_index);
#pragma omp parallel for schedule(static) if (rows * vocab_size >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) {
    const T* row = logits + r * padded_vocab;
    T max_logit = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : max_logit)
    for (i64 v = 0; v < vocab_size; ++v) max_logit = row[v] > max_logit ? row[v] : max_logit;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (i64 v = 0; v < vocab_size; ++v) sum += fast_exp(row[v] - max_logit);
    const T row_lse = max_logit + std::log(sum);
    const std::int32_t t = targets[r];
    lse[r] = row_lse;
    losses[r] = t == ignore_index ? static_cast<T>(0) : row_lse - row[t];
  }
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const std::int32_t* targets,
                            T dloss, i64 rows, i64 padded_vocab, i64 vocab_size,
                            std::int32_t ignore_index) {
  check_targets(targets, rows, vocab_size, ignore_index);
#pragma omp parallel for schedule(static) if (rows * vocab_size >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) {
    // dlogits may alias logits: element v is read before it is written, and nothing reads
    // logits after the loop.
    const T* row = logits + r * padded_vocab;
    T* drow = dlogits + r * padded_vocab;
    const std::int32_t t = targets[r];
    if (t == ignore_index) {
      for (i64 v = 0; v < padded_vocab; ++v) drow[v] = 0;
      continue;
    }
    const T row_lse = lse[r];
#pragma omp simd
    for (i64 v = 0; v < vocab_size; ++v) drow[v] = fast_exp(row[v] - row_lse) * dloss;
    drow[t] -= dloss;
    for (i64 v = vocab_size; v < padded_vocab; ++v) drow[v] = 0;
  }
}

template void cross_entropy_forward<float>(float*, float*, const float*, const std::int32_t*, i64,
                                           i64, i64, std::int32_t);
template void cross_entropy_forward<double>(double*, double*, const double*, const std::int32_t*,
                                            i64, i64, i64, std::int32_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const std::int32_t*,
                                            float, i64, i64, i64, std::int32_t);
template void cross_entropy_backward<double>(double*, const double*, const double*,
                                             const std::int32_t*, double, i64, i64, i64,
                                             std::int32_t);

}  // namespace ternion::cpu
