// Softmax cross-entropy, one row per task. The forward shifts the exponentials by the row's
// max, so nothing overflows; the backward recomputes the softmax from the saved logsumexp
// instead of storing it.
//
// The per-row math lives once, in the helpers below: the vocab-parallel pieces apply one each
// to a shard, and the whole-vocabulary forward applies them chunk by chunk to each row, so the
// row is read from memory once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "framework/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vector_math.h"

namespace ternion::cpu {

namespace {

constexpr i64 kMinParallelElements = 1 << 14;

// The max before any element, or of only -inf ones.
template <class T>
constexpr T kNoMax = -std::numeric_limits<T>::infinity();

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

// The real columns of a shard are its first ones: global columns [vocab_start, vocab_size).
i64 real_columns(i64 local_vocab, i64 vocab_start, i64 vocab_size) {
  return std::clamp(vocab_size - vocab_start, i64{0}, local_vocab);
}

bool target_in_shard(std::int32_t target, std::int32_t ignore_index, i64 local_vocab,
                     i64 vocab_start) {
  return target != ignore_index && target >= vocab_start && target < vocab_start + local_vocab;
}

template <class T>
T max_of_row(const T* row, i64 n_real) {
  T max_logit = kNoMax<T>;
#pragma omp simd reduction(max : max_logit)
  for (i64 v = 0; v < n_real; ++v) max_logit = row[v] > max_logit ? row[v] : max_logit;
  return max_logit;
}

template <class T>
T sum_exp_of_row(const T* row, i64 n_real, T shift) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (i64 v = 0; v < n_real; ++v) sum += fast_exp_bounded(row[v] - shift);
  return sum;
}

template <class T>
T target_logit_of_row(const T* row, std::int32_t target, std::int32_t ignore_index,
                      i64 local_vocab, i64 vocab_start) {
  return target_in_shard(target, ignore_index, local_vocab, vocab_start) ? row[target - vocab_start]
                                                                         : static_cast<T>(0);
}

// exp(row[v] - shift) summed over a chunk and, in the same loop, the chunk's max. Meaningful
// only where row[v] - shift stays at most 89 (the caller checks the max, else discards it).
template <class T>
T sum_exp_and_max_of_chunk(const T* row, i64 n, T shift, T& chunk_max) {
  T sum = 0, max_logit = kNoMax<T>;
#pragma omp simd reduction(+ : sum) reduction(max : max_logit)
  for (i64 v = 0; v < n; ++v) {
    max_logit = row[v] > max_logit ? row[v] : max_logit;
    sum += fast_exp_bounded(row[v] - shift);
  }
  chunk_max = max_logit;
  return sum;
}

// As sum_exp_of_row, keeping each exponential in out[v] (which may be row itself).
template <class T>
T sum_exp_into_row(T* out, const T* row, i64 n_real, T shift) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (i64 v = 0; v < n_real; ++v) {
    const T e = fast_exp_bounded(row[v] - shift);
    out[v] = e;
    sum += e;
  }
  return sum;
}

constexpr i64 kChunk = 2048;  // 8 KiB of f32
// A chunk whose max is more than this above the max before it is taken again against its
// own max: e^64 times a chunk's 2048 elements stays far below FLT_MAX.
constexpr double kMaxRise = 64;

// `sum` (of exponentials against `from`) rescaled to be against `to` >= from.
template <class T>
void rescale_sum(T& sum, T& from, T to) {
  if (to > from) {
    sum *= fast_exp_bounded(from - to);
    from = to;
  }
}

// The sum of exp(row[v] - max) and the max, in one read of the row, chunk by chunk: each
// chunk's exponentials are taken against the max of the chunks before it while the same loop
// finds the chunk's own max, and the sum is rescaled when that is higher. Only the first chunk
// (no max yet) and a chunk whose max rises by more than kMaxRise are read twice. Taking each
// chunk's max first, then its exponentials, left the memory idle while the exponentials ran
// and the arithmetic idle while the max streamed in (the forward took 1.5x as long on AVX2).
template <class T>
void max_and_sum_exp_of_row(const T* row, i64 n_real, T& max_logit, T& sum_exp) {
  T running_max = kNoMax<T>, sum = 0;
  for (i64 start = 0; start < n_real; start += kChunk) {
    const i64 length = std::min(kChunk, n_real - start);
    const T* chunk = row + start;
    T chunk_max = kNoMax<T>, chunk_sum = 0;
    if (running_max != kNoMax<T>)
      chunk_sum = sum_exp_and_max_of_chunk(chunk, length, running_max, chunk_max);
    else
      chunk_max = max_of_row(chunk, length);
    // The rise as the exponentials see it (running_max + kMaxRise could round down past a
    // rise of one ulp at large magnitudes).
    if (running_max == kNoMax<T> || chunk_max - running_max > static_cast<T>(kMaxRise)) {
      rescale_sum(sum, running_max, chunk_max);
      // Before any finite max (chunks of -inf, or NaN), against 0: their exponentials are 0
      // (or NaN, which the sum keeps), as the vocab-parallel pieces have them.
      chunk_sum = sum_exp_of_row(chunk, length, running_max == kNoMax<T> ? T{0} : running_max);
    }
    sum += chunk_sum;  // against running_max
    rescale_sum(sum, running_max, chunk_max);
  }
  max_logit = running_max;
  sum_exp = sum;
}

// As max_and_sum_exp_of_row, keeping each exponential in exps (which may be row itself),
// against the max of the chunks up to its own (in chunk_shift[chunk]). Each chunk's max is
// taken first: exponentials against a lower max could not be taken again from a row they
// overwrote.
template <class T>
void max_and_exps_of_row(const T* row, i64 n_real, T& max_logit, T& sum_exp, T* exps,
                         T* chunk_shift) {
  T running_max = kNoMax<T>, sum = 0;
  for (i64 start = 0; start < n_real; start += kChunk) {
    const i64 length = std::min(kChunk, n_real - start);
    rescale_sum(sum, running_max, max_of_row(row + start, length));
    // Before any finite max, against 0 (as in max_and_sum_exp_of_row); the shift stays
    // kNoMax, which tells the caller these exponentials (0 or NaN) are scaled by 0.
    sum += sum_exp_into_row(exps + start, row + start, length,
                            running_max == kNoMax<T> ? T{0} : running_max);
    chunk_shift[start / kChunk] = running_max;
  }
  max_logit = running_max;
  sum_exp = sum;
}

template <class T>
T logsumexp(T max_logit, T sum_exp) {
  return max_logit + std::log(sum_exp);
}

template <class T>
T loss_of_row(T row_lse, T target_logit, std::int32_t target, std::int32_t ignore_index) {
  return target == ignore_index ? static_cast<T>(0) : row_lse - target_logit;
}

}  // namespace

template <class T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const std::int32_t* targets,
                           i64 rows, i64 padded_vocab, i64 vocab_size, std::int32_t ignore_index) {
  check_targets(targets, rows, vocab_size, ignore_index);
#pragma omp parallel for schedule(static) if (rows * vocab_size >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) {
    const T* row = logits + r * padded_vocab;
    T max_logit, sum_exp;
    max_and_sum_exp_of_row(row, vocab_size, max_logit, sum_exp);
    const T row_lse = logsumexp(max_logit, sum_exp);
    const std::int32_t t = targets[r];
    lse[r] = row_lse;
    losses[r] =
        loss_of_row(row_lse, target_logit_of_row(row, t, ignore_index, padded_vocab, i64{0}), t,
                    ignore_index);
  }
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const std::int32_t* targets,
                            T dloss, i64 rows, i64 local_vocab, i64 vocab_start, i64 vocab_size,
                            std::int32_t ignore_index) {
  check_targets(targets, rows, vocab_size, ignore_index);
  const i64 n_real = real_columns(local_vocab, vocab_start, vocab_size);
#pragma omp parallel for schedule(static) if (rows * local_vocab >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) {
    // dlogits may alias logits: element v is read before it is written, and nothing reads
    // logits after the loop.
    const T* row = logits + r * local_vocab;
    T* drow = dlogits + r * local_vocab;
    const std::int32_t t = targets[r];
    if (t == ignore_index) {
      for (i64 v = 0; v < local_vocab; ++v) drow[v] = 0;
      continue;
    }
    const T row_lse = lse[r];
#pragma omp simd
    for (i64 v = 0; v < n_real; ++v) drow[v] = fast_exp_bounded(row[v] - row_lse) * dloss;
    // A target in the shard is below vocab_size (check_targets), so its column is a real one.
    if (target_in_shard(t, ignore_index, local_vocab, vocab_start)) drow[t - vocab_start] -= dloss;
    for (i64 v = n_real; v < local_vocab; ++v) drow[v] = 0;
  }
}

// One exponential a logit, where forward then backward take two (the exponential, not
// memory, bounds both on the CPU): a chunked pass keeps each exponential in dlogits, then
// each chunk is scaled once to the softmax times dloss. Its sums are taken against other
// shifts than the forward's one-pass sums, so the losses and lse agree with the forward's to
// rounding, dlogits with the backward's to rounding.
template <class T>
void cross_entropy_forward_backward(T* losses, T* lse, T* dlogits, const T* logits,
                                    const std::int32_t* targets, T dloss, i64 rows,
                                    i64 padded_vocab, i64 vocab_size, std::int32_t ignore_index) {
  check_targets(targets, rows, vocab_size, ignore_index);
  const i64 chunks = (vocab_size + kChunk - 1) / kChunk;
#pragma omp parallel if (rows * vocab_size >= kMinParallelElements)
  {
    std::vector<T> chunk_shift(static_cast<std::size_t>(chunks));
#pragma omp for schedule(static)
    for (i64 r = 0; r < rows; ++r) {
      // drow may alias row: the target's logit is read first, every other element is read
      // before it is written.
      const T* row = logits + r * padded_vocab;
      T* drow = dlogits + r * padded_vocab;
      const std::int32_t t = targets[r];
      const T target_logit = target_logit_of_row(row, t, ignore_index, padded_vocab, i64{0});
      T max_logit, sum_exp;
      max_and_exps_of_row(row, vocab_size, max_logit, sum_exp, drow, chunk_shift.data());
      const T row_lse = logsumexp(max_logit, sum_exp);
      lse[r] = row_lse;
      losses[r] = loss_of_row(row_lse, target_logit, t, ignore_index);
      if (t == ignore_index) {  // zeros, whatever the row holds (a non-finite logit too)
        std::fill(drow, drow + padded_vocab, static_cast<T>(0));
        continue;
      }
      const T weight = dloss / sum_exp;
      for (i64 c = 0; c < chunks; ++c) {
        const i64 start = c * kChunk, end = std::min(vocab_size, start + kChunk);
        const T shift = chunk_shift[static_cast<std::size_t>(c)];
        const T scale =
            shift == kNoMax<T> ? T{0} : fast_exp_bounded(shift - max_logit) * weight;
#pragma omp simd
        for (i64 v = start; v < end; ++v) drow[v] *= scale;
      }
      drow[t] -= dloss;
      for (i64 v = vocab_size; v < padded_vocab; ++v) drow[v] = 0;
    }
  }
}

template <class T>
void cross_entropy_row_max(T* row_max, const T* logits, i64 rows, i64 local_vocab,
                           i64 vocab_start, i64 vocab_size) {
  const i64 n_real = real_columns(local_vocab, vocab_start, vocab_size);
#pragma omp parallel for schedule(static) if (rows * n_real >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r) row_max[r] = max_of_row(logits + r * local_vocab, n_real);
}

template <class T>
void cross_entropy_row_sum_exp(T* sum_exp, const T* logits, const T* global_max, i64 rows,
                               i64 local_vocab, i64 vocab_start, i64 vocab_size) {
  const i64 n_real = real_columns(local_vocab, vocab_start, vocab_size);
#pragma omp parallel for schedule(static) if (rows * n_real >= kMinParallelElements)
  for (i64 r = 0; r < rows; ++r)
    sum_exp[r] = sum_exp_of_row(logits + r * local_vocab, n_real, global_max[r]);
}

// The two per-row-constant pieces run serially: a thread team costs more than N lookups.
template <class T>
void cross_entropy_target_logit(T* target_logit, const T* logits, const std::int32_t* targets,
                                i64 rows, i64 local_vocab, i64 vocab_start, i64 vocab_size,
                                std::int32_t ignore_index) {
  check_targets(targets, rows, vocab_size, ignore_index);
  for (i64 r = 0; r < rows; ++r)
    target_logit[r] = target_logit_of_row(logits + r * local_vocab, targets[r], ignore_index,
                                          local_vocab, vocab_start);
}

template <class T>
void cross_entropy_finish(T* losses, T* lse, const T* global_max, const T* global_sum_exp,
                          const T* target_logit, const std::int32_t* targets, i64 rows,
                          std::int32_t ignore_index) {
  for (i64 r = 0; r < rows; ++r) {
    const T row_lse = logsumexp(global_max[r], global_sum_exp[r]);
    lse[r] = row_lse;
    losses[r] = loss_of_row(row_lse, target_logit[r], targets[r], ignore_index);
  }
}

template void cross_entropy_forward<float>(float*, float*, const float*, const std::int32_t*, i64,
                                           i64, i64, std::int32_t);
template void cross_entropy_forward<double>(double*, double*, const double*, const std::int32_t*,
                                            i64, i64, i64, std::int32_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const std::int32_t*,
                                            float, i64, i64, i64, i64, std::int32_t);
template void cross_entropy_backward<double>(double*, const double*, const double*,
                                             const std::int32_t*, double, i64, i64, i64, i64,
                                             std::int32_t);
template void cross_entropy_forward_backward<float>(float*, float*, float*, const float*,
                                                    const std::int32_t*, float, i64, i64, i64,
                                                    std::int32_t);
template void cross_entropy_forward_backward<double>(double*, double*, double*, const double*,
                                                     const std::int32_t*, double, i64, i64, i64,
                                                     std::int32_t);
template void cross_entropy_row_max<float>(float*, const float*, i64, i64, i64, i64);
template void cross_entropy_row_max<double>(double*, const double*, i64, i64, i64, i64);
template void cross_entropy_row_sum_exp<float>(float*, const float*, const float*, i64, i64, i64,
                                               i64);
template void cross_entropy_row_sum_exp<double>(double*, const double*, const double*, i64, i64,
                                                i64, i64);
template void cross_entropy_target_logit<float>(float*, const float*, const std::int32_t*, i64,
                                                i64, i64, i64, std::int32_t);
template void cross_entropy_target_logit<double>(double*, const double*, const std::int32_t*, i64,
                                                 i64, i64, i64, std::int32_t);
template void cross_entropy_finish<float>(float*, float*, const float*, const float*, const float*,
                                          const std::int32_t*, i64, std::int32_t);
template void cross_entropy_finish<double>(double*, double*, const double*, const double*,
                                           const double*, const std::int32_t*, i64, std::int32_t);

}  // namespace ternion::cpu
