// Softmax cross-entropy on CUDA, whole or as the vocab-parallel pieces: the CPU op's math
// (kernels/cpu/cross_entropy.cpp, contract in kernels/cross_entropy.h) with one block per row.
//
//   forward        lse[n] = max + log(sum_v exp(logit - max)) over the real columns
//                  losses[n] = lse[n] - logits[n, target]   (0 where target == ignore_index)
//                  in one read of the row (online softmax: each thread keeps a running max
//                  and its sum of exponentials, rescaled when the max grows, and the block
//                  merges the pairs), where the pieces below read a shard twice
//   backward       dlogits[n, v] = (exp(logit - lse[n]) - [v == target]) * dloss on real
//                  columns, 0 on padding columns and on every column of an ignored row
//   forward_backward  both in one kernel, bit for bit the two (the row's second read mostly
//                  from L2)
//   row_max, row_sum_exp, target_logit, finish: the pieces, each as the CPU's
//
// dtypes: logits / dlogits F32 or BF16 (one dtype); everything per row F32; targets I32. All
// math is F32, with fast_exp (kernels/vector_math.h) wherever the CPU uses it; on the GPU that
// is the special-function unit's exponential, about 1e-6 relative, so the results agree with
// the CPU's to about that (the sums also run in a different order). Per logit the kernels
// spend a few instructions (the forward: a max, a subtraction, the exponential and an add;
// the gradient: selects instead of branches): at 50k columns a row, 800M logits a GPT-2
// micro-batch, the loops must stay below the memory time, which Cephes' exponential alone
// would not.
//
// One difference from the CPU: a target that is neither ignore_index nor in [0, vocab_size) is
// a DataError there, found by scanning the targets on the host. Here that would cost a device
// synchronisation per call, so the kernels instead make that row's loss (and, in the backward,
// its gradient; in target_logit, its value) NaN, which the trainer's non-finite check reports.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/vector_math.h"

namespace ternion::cuda {

namespace {

using i64 = std::int64_t;

constexpr int kWarpSize = 32;
constexpr int kRowThreads = 512;  // one block per row: ~100 columns per thread at V = 50k
constexpr int kRowWarps = kRowThreads / kWarpSize;
constexpr int kElementThreads = 256;  // the per-row kernels: one thread per row

using detail::from_float;
using detail::to_float;

struct MaxOp {  // fmaxf ignores a NaN operand, as the CPU's max loop does
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduces one value per thread over the block (blockDim.x == kRowThreads) in a fixed order and
// returns the result to every thread. `scratch` holds kRowWarps floats; the leading barrier
// lets a block call this several times with the same scratch.
template <class Op>
__device__ float block_reduce(float value, Op op, float* scratch) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < kRowWarps; ++w) total = op(total, scratch[w]);
  return total;
}

// The real columns of a shard are its first ones: global columns [vocab_start, vocab_size).
__host__ __device__ inline i64 real_columns(i64 local_vocab, i64 vocab_start, i64 vocab_size) {
  const i64 n = vocab_size - vocab_start;
  return n < 0 ? 0 : (n > local_vocab ? local_vocab : n);
}

__device__ inline bool target_valid(std::int32_t target, std::int32_t ignore_index,
                                    i64 vocab_size) {
  return target == ignore_index || (target >= 0 && target < vocab_size);
}

template <class Elem>
__device__ float max_of_row(const Elem* row, i64 n_real, float* scratch) {
  float max_logit = -INFINITY;
  for (i64 v = threadIdx.x; v < n_real; v += kRowThreads)
    max_logit = fmaxf(max_logit, to_float(row[v]));
  return block_reduce(max_logit, MaxOp{}, scratch);
}

template <class Elem>
__device__ float sum_exp_of_row(const Elem* row, i64 n_real, float shift, float* scratch) {
  float sum = 0.0f;
  for (i64 v = threadIdx.x; v < n_real; v += kRowThreads) sum += fast_exp(to_float(row[v]) - shift);
  return block_reduce(sum, SumOp{}, scratch);
}

// A running softmax normaliser: max, and the sum of exp(x - max) over the values seen. Empty:
// (-inf, 0).
struct MaxSumExp {
  float max;
  float sum;
};

__device__ inline MaxSumExp merge(MaxSumExp a, MaxSumExp b) {
  const float max = fmaxf(a.max, b.max);
  // Both maxima -inf: -inf - -inf would be NaN. Each sum is then 0 (nothing, or only -inf
  // values, seen) or NaN (a NaN seen), and a NaN must survive the merge.
  if (max == -INFINITY) return {max, a.sum + b.sum};
  return {max, a.sum * fast_exp(a.max - max) + b.sum * fast_exp(b.max - max)};
}

// Merges one pair per thread over the block (blockDim.x == kRowThreads) in a fixed order and
// returns the result to every thread; `scratch` holds kRowWarps pairs.
__device__ MaxSumExp block_merge(MaxSumExp value, MaxSumExp* scratch) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const MaxSumExp other{__shfl_xor_sync(0xFFFFFFFFu, value.max, offset),
                          __shfl_xor_sync(0xFFFFFFFFu, value.sum, offset)};
    value = merge(value, other);
  }
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  MaxSumExp total = scratch[0];
  for (int w = 1; w < kRowWarps; ++w) total = merge(total, scratch[w]);
  return total;
}

// Adds N values to a thread's running normaliser: their max first, one rescale of the sum
// when it grows (rare after a thread's first columns), then one exponential each, with no
// branch per element. The shift stays 0 while the max is -inf (every value so far -inf or
// NaN), where x - max would make exp(-inf - -inf) = NaN of an empty row's -inf columns.
template <int N>
__device__ inline void absorb(MaxSumExp& mine, const float (&x)[N]) {
  float max = x[0];
#pragma unroll
  for (int k = 1; k < N; ++k) max = fmaxf(max, x[k]);  // a NaN never wins: it poisons the sum
  if (max > mine.max) {
    mine.sum *= fast_exp(mine.max - max);  // 0 while mine.max is -inf
    mine.max = max;
  }
  const float shift = mine.max == -INFINITY ? 0.0f : mine.max;
  float sum = fast_exp(x[0] - shift);
#pragma unroll
  for (int k = 1; k < N; ++k) sum += fast_exp(x[k] - shift);
  mine.sum += sum;
}

// The log-sum-exp of a row's real columns [0, vocab_size), returned to every thread of the
// block. N columns at a time (16-byte loads with N = kVecWidth, where padded_vocab and the
// pointer allow) up to the last multiple of N below vocab_size, then one at a time. Column
// indices are 32-bit (the launchers check the row length).
template <int N, class Elem>
__device__ float row_log_sum_exp(const Elem* row, int vocab_size, MaxSumExp* scratch) {
  MaxSumExp mine{-INFINITY, 0.0f};
  const int vector_end = vocab_size / N * N;
  for (int v = static_cast<int>(threadIdx.x) * N; v < vector_end; v += kRowThreads * N) {
    const auto xv = detail::load_vec<N>(row + v);
    float x[N];
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = to_float(xv.v[k]);
    absorb(mine, x);
  }
  for (int v = vector_end + static_cast<int>(threadIdx.x); v < vocab_size; v += kRowThreads) {
    const float x[1] = {to_float(row[v])};
    absorb(mine, x);
  }
  const MaxSumExp row_total = block_merge(mine, scratch);
  return row_total.max + logf(row_total.sum);
}

// Thread 0's part of the forward: the row's lse and loss.
template <class Elem>
__device__ void write_loss(float* losses, float* lse, i64 r, const Elem* row, float row_lse,
                           std::int32_t t, i64 vocab_size, std::int32_t ignore_index) {
  lse[r] = row_lse;
  if (!target_valid(t, ignore_index, vocab_size)) {
    losses[r] = NAN;
  } else {
    losses[r] = t == ignore_index ? 0.0f : row_lse - to_float(row[t]);
  }
}

// The gradient of row r over this shard's columns (contract at the top of the file); drow may
// alias row: each element is read, then written, by the same thread. N columns at a time, the
// per-element conditions as selects on 32-bit column indices.
template <int N, class Elem>
__device__ void write_row_gradient(Elem* drow, const Elem* row, float row_lse, std::int32_t t,
                                   float dloss, int local_vocab, i64 vocab_start, i64 vocab_size,
                                   std::int32_t ignore_index) {
  const bool ignored = t == ignore_index;
  const bool valid = target_valid(t, ignore_index, vocab_size);
  // The target's local column, or -1 where it lies in another shard (or the row is ignored).
  const int target_column = !ignored && t >= vocab_start && t < vocab_start + local_vocab
                                ? static_cast<int>(t - vocab_start)
                                : -1;
  // Columns [0, n_live) get exp(x - lse) * dloss: none of an ignored row, no padding column.
  const int n_live =
      ignored ? 0 : static_cast<int>(real_columns(local_vocab, vocab_start, vocab_size));
  for (int v0 = static_cast<int>(threadIdx.x) * N; v0 < local_vocab; v0 += kRowThreads * N) {
    const auto xv = detail::load_vec<N>(row + v0);
    detail::Vec<Elem, N> dv;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int v = v0 + k;
      // Rounded product, then the subtraction: the CPU's two steps, not one fused
      // multiply-add.
      float grad = v < n_live ? __fmul_rn(fast_exp(to_float(xv.v[k]) - row_lse), dloss) : 0.0f;
      grad = v == target_column ? grad - dloss : grad;
      dv.v[k] = from_float<Elem>(valid ? grad : NAN);
    }
    detail::store_vec<N>(drow + v0, dv);
  }
}

// Row r of logits [rows, padded_vocab] per block.
template <int N, class Elem>
__global__ void cross_entropy_forward_kernel(float* losses, float* lse, const Elem* logits,
                                             const std::int32_t* targets, i64 padded_vocab,
                                             i64 vocab_size, std::int32_t ignore_index) {
  __shared__ MaxSumExp scratch[kRowWarps];
  const i64 r = blockIdx.x;
  const Elem* row = logits + r * padded_vocab;
  const float row_lse = row_log_sum_exp<N>(row, static_cast<int>(vocab_size), scratch);
  if (threadIdx.x == 0)
    write_loss(losses, lse, r, row, row_lse, targets[r], vocab_size, ignore_index);
}

template <int N, class Elem>
__global__ void cross_entropy_backward_kernel(Elem* dlogits, const Elem* logits, const float* lse,
                                              const std::int32_t* targets, float dloss,
                                              i64 local_vocab, i64 vocab_start, i64 vocab_size,
                                              std::int32_t ignore_index) {
  const i64 r = blockIdx.x;
  write_row_gradient<N>(dlogits + r * local_vocab, logits + r * local_vocab, lse[r], targets[r],
                        dloss, static_cast<int>(local_vocab), vocab_start, vocab_size,
                        ignore_index);
}

// Both, one row per block: the gradient pass reads the row right after the forward's pass, so
// it mostly comes from L2. The lse is the forward's value itself (the float the unfused
// backward reads back), and thread 0 reads the target's logit before a barrier, ahead of any
// overwrite of the row. The same N as the unfused kernels (the caller checks): the same bits.
template <int N, class Elem>
__global__ void cross_entropy_forward_backward_kernel(float* losses, float* lse, Elem* dlogits,
                                                      const Elem* logits,
                                                      const std::int32_t* targets, float dloss,
                                                      i64 padded_vocab, i64 vocab_size,
                                                      std::int32_t ignore_index) {
  __shared__ MaxSumExp scratch[kRowWarps];
  const i64 r = blockIdx.x;
  const Elem* row = logits + r * padded_vocab;
  const std::int32_t t = targets[r];
  const float row_lse = row_log_sum_exp<N>(row, static_cast<int>(vocab_size), scratch);
  if (threadIdx.x == 0) write_loss(losses, lse, r, row, row_lse, t, vocab_size, ignore_index);
  __syncthreads();
  write_row_gradient<N>(dlogits + r * padded_vocab, row, row_lse, t, dloss,
                        static_cast<int>(padded_vocab), /*vocab_start=*/0, vocab_size,
                        ignore_index);
}

template <class Elem>
__global__ void cross_entropy_row_max_kernel(float* row_max, const Elem* logits, i64 local_vocab,
                                             i64 n_real) {
  __shared__ float scratch[kRowWarps];
  const i64 r = blockIdx.x;
  const float max_logit = max_of_row(logits + r * local_vocab, n_real, scratch);
  if (threadIdx.x == 0) row_max[r] = max_logit;
}

template <class Elem>
__global__ void cross_entropy_row_sum_exp_kernel(float* sum_exp, const Elem* logits,
                                                 const float* global_max, i64 local_vocab,
                                                 i64 n_real) {
  __shared__ float scratch[kRowWarps];
  const i64 r = blockIdx.x;
  const float sum = sum_exp_of_row(logits + r * local_vocab, n_real, global_max[r], scratch);
  if (threadIdx.x == 0) sum_exp[r] = sum;
}

// One thread per row from here on.
template <class Elem>
__global__ void cross_entropy_target_logit_kernel(float* target_logit, const Elem* logits,
                                                  const std::int32_t* targets, i64 rows,
                                                  i64 local_vocab, i64 vocab_start,
                                                  i64 vocab_size, std::int32_t ignore_index) {
  const i64 r = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::int32_t t = targets[r];
  const bool in_shard = t != ignore_index && t >= vocab_start && t < vocab_start + local_vocab;
  float value = in_shard ? to_float(logits[r * local_vocab + (t - vocab_start)]) : 0.0f;
  if (!target_valid(t, ignore_index, vocab_size)) value = NAN;
  target_logit[r] = value;
}

__global__ void cross_entropy_finish_kernel(float* losses, float* lse, const float* global_max,
                                            const float* global_sum_exp,
                                            const float* target_logit,
                                            const std::int32_t* targets, i64 rows,
                                            std::int32_t ignore_index) {
  const i64 r = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float row_lse = global_max[r] + logf(global_sum_exp[r]);
  lse[r] = row_lse;
  losses[r] = targets[r] == ignore_index ? 0.0f : row_lse - target_logit[r];
}

// One block per row of `logits`; the row kernels index columns in 32 bits, with room for a
// thread's last step past the end.
unsigned row_grid(const Tensor& logits) {
  const i64 rows = logits.size(0), columns = logits.size(1);
  TN_CHECK(rows <= 0x7FFFFFFF, "cross_entropy (cuda): ", rows, " rows exceed the grid");
  TN_CHECK(columns <= 0x7FFFFFFF - kRowThreads * detail::kVecWidth, "cross_entropy (cuda): ",
           columns, " columns a row exceed 32-bit indexing");
  return static_cast<unsigned>(rows);
}

unsigned element_grid(i64 rows) {
  return static_cast<unsigned>((rows + kElementThreads - 1) / kElementThreads);
}

bool is_bf16(const Tensor& t) { return t.dtype() == DType::BF16; }

template <class Elem>
void forward(Tensor& losses, Tensor& lse, const Tensor& logits, const Tensor& targets,
             i64 vocab_size, std::int32_t ignore_index) {
  const int width = detail::vector_width(logits.size(1), logits.data<Elem>());
  detail::with_vector_width(width, [&](auto n) {
    cross_entropy_forward_kernel<decltype(n)::value, Elem>
        <<<row_grid(logits), kRowThreads, 0, compute_stream()>>>(
            losses.data<float>(), lse.data<float>(), logits.data<Elem>(),
            targets.data<std::int32_t>(), logits.size(1), vocab_size, ignore_index);
    TN_CUDA_CHECK_LAUNCH();
  });
}

template <class Elem>
void backward(Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
              float dloss, i64 vocab_size, std::int32_t ignore_index, i64 vocab_start) {
  const int width =
      detail::vector_width(logits.size(1), logits.data<Elem>(), dlogits.data<Elem>());
  detail::with_vector_width(width, [&](auto n) {
    cross_entropy_backward_kernel<decltype(n)::value, Elem>
        <<<row_grid(logits), kRowThreads, 0, compute_stream()>>>(
            dlogits.data<Elem>(), logits.data<Elem>(), lse.data<float>(),
            targets.data<std::int32_t>(), dloss, logits.size(1), vocab_start, vocab_size,
            ignore_index);
    TN_CUDA_CHECK_LAUNCH();
  });
}

// The fused kernel's second read of a row hits L2 only if the rows in flight (one per resident
// block) fit there: 4 blocks of 512 threads per SM at GPT-2's vocabulary in bf16 would hold
// 132 x 4 x 100 KB = 53 MB on an H100/H200, more than its 50 MB L2. So the kernel asks for
// dynamic shared memory it does not use, enough that no more blocks share an SM than keep the
// rows within kL2Share of L2. Returns the bytes to ask for, 0 where no cap is needed.
constexpr double kL2Share = 0.8;
constexpr int kMaxRowBlocksPerSm = 2048 / kRowThreads;

int device_attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  TN_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

std::size_t occupancy_cap_bytes(i64 row_bytes) {
  int device = 0;
  TN_CUDA_CHECK(cudaGetDevice(&device));
  const double l2 = device_attribute(cudaDevAttrL2CacheSize, device);
  const double sms = device_attribute(cudaDevAttrMultiProcessorCount, device);
  const auto per_sm = static_cast<std::size_t>(
      device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  const auto per_block_max =
      static_cast<std::size_t>(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const i64 blocks = static_cast<i64>(kL2Share * l2 / (sms * static_cast<double>(row_bytes)));
  if (blocks >= kMaxRowBlocksPerSm || l2 <= 0 || per_sm == 0) return 0;
  // (blocks + 1) blocks of this much do not fit an SM; `blocks` do (1 KB per block is the
  // runtime's reservation).
  const std::size_t bytes = per_sm / static_cast<std::size_t>(std::max<i64>(blocks, 1) + 1) + 1024;
  return std::min(bytes, per_block_max);
}

// The fused kernel where the forward's and the backward's vector widths agree (always where
// dlogits is logits, as in the LM head); else the two kernels.
template <class Elem>
void forward_backward(Tensor& losses, Tensor& lse, Tensor& dlogits, const Tensor& logits,
                      const Tensor& targets, float dloss, i64 vocab_size,
                      std::int32_t ignore_index) {
  const int forward_width = detail::vector_width(logits.size(1), logits.data<Elem>());
  const int width =
      detail::vector_width(logits.size(1), logits.data<Elem>(), dlogits.data<Elem>());
  if (width != forward_width) {
    forward<Elem>(losses, lse, logits, targets, vocab_size, ignore_index);
    backward<Elem>(dlogits, logits, lse, targets, dloss, vocab_size, ignore_index, 0);
    return;
  }
  const std::size_t cap = occupancy_cap_bytes(logits.size(1) * static_cast<i64>(sizeof(Elem)));
  detail::with_vector_width(width, [&](auto n) {
    auto* kernel = cross_entropy_forward_backward_kernel<decltype(n)::value, Elem>;
    if (cap > 0) {
      TN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(cap)));
    }
    kernel<<<row_grid(logits), kRowThreads, cap, compute_stream()>>>(
        losses.data<float>(), lse.data<float>(), dlogits.data<Elem>(), logits.data<Elem>(),
        targets.data<std::int32_t>(), dloss, logits.size(1), vocab_size, ignore_index);
    TN_CUDA_CHECK_LAUNCH();
  });
}

template <class Elem>
void row_max(Tensor& out, const Tensor& logits, i64 vocab_start, i64 vocab_size) {
  const i64 n_real = real_columns(logits.size(1), vocab_start, vocab_size);
  cross_entropy_row_max_kernel<Elem>
      <<<row_grid(logits), kRowThreads, 0, compute_stream()>>>(
          out.data<float>(), logits.data<Elem>(), logits.size(1), n_real);
  TN_CUDA_CHECK_LAUNCH();
}

template <class Elem>
void row_sum_exp(Tensor& out, const Tensor& logits, const Tensor& global_max, i64 vocab_start,
                 i64 vocab_size) {
  const i64 n_real = real_columns(logits.size(1), vocab_start, vocab_size);
  cross_entropy_row_sum_exp_kernel<Elem>
      <<<row_grid(logits), kRowThreads, 0, compute_stream()>>>(
          out.data<float>(), logits.data<Elem>(), global_max.data<float>(), logits.size(1),
          n_real);
  TN_CUDA_CHECK_LAUNCH();
}

template <class Elem>
void target_logit(Tensor& out, const Tensor& logits, const Tensor& targets, i64 vocab_start,
                  i64 vocab_size, std::int32_t ignore_index) {
  const i64 rows = logits.size(0);
  cross_entropy_target_logit_kernel<Elem>
      <<<element_grid(rows), kElementThreads, 0, compute_stream()>>>(
          out.data<float>(), logits.data<Elem>(), targets.data<std::int32_t>(), rows,
          logits.size(1), vocab_start, vocab_size, ignore_index);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void cross_entropy_forward(Tensor& losses, Tensor& lse, const Tensor& logits,
                           const Tensor& targets, std::int64_t vocab_size,
                           std::int32_t ignore_index) {
  if (logits.size(0) == 0) return;
  if (is_bf16(logits)) {
    forward<BFloat16>(losses, lse, logits, targets, vocab_size, ignore_index);
  } else {
    forward<float>(losses, lse, logits, targets, vocab_size, ignore_index);
  }
}

void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, float dloss, std::int64_t vocab_size,
                            std::int32_t ignore_index, std::int64_t vocab_start) {
  if (logits.size(0) == 0) return;
  if (is_bf16(logits)) {
    backward<BFloat16>(dlogits, logits, lse, targets, dloss, vocab_size, ignore_index,
                       vocab_start);
  } else {
    backward<float>(dlogits, logits, lse, targets, dloss, vocab_size, ignore_index, vocab_start);
  }
}

void cross_entropy_forward_backward(Tensor& losses, Tensor& lse, Tensor& dlogits,
                                    const Tensor& logits, const Tensor& targets, float dloss,
                                    std::int64_t vocab_size, std::int32_t ignore_index) {
  if (logits.size(0) == 0) return;
  if (is_bf16(logits)) {
    forward_backward<BFloat16>(losses, lse, dlogits, logits, targets, dloss, vocab_size,
                               ignore_index);
  } else {
    forward_backward<float>(losses, lse, dlogits, logits, targets, dloss, vocab_size,
                            ignore_index);
  }
}

void cross_entropy_row_max(Tensor& row_max_out, const Tensor& logits, std::int64_t vocab_start,
                           std::int64_t vocab_size) {
  if (logits.size(0) == 0) return;
  if (is_bf16(logits)) {
    row_max<BFloat16>(row_max_out, logits, vocab_start, vocab_size);
  } else {
    row_max<float>(row_max_out, logits, vocab_start, vocab_size);
  }
}

void cross_entropy_row_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& global_max,
                               std::int64_t vocab_start, std::int64_t vocab_size) {
  if (logits.size(0) == 0) return;
  if (is_bf16(logits)) {
    row_sum_exp<BFloat16>(sum_exp, logits, global_max, vocab_start, vocab_size);
  } else {
    row_sum_exp<float>(sum_exp, logits, global_max, vocab_start, vocab_size);
  }
}

void cross_entropy_target_logit(Tensor& target_logit_out, const Tensor& logits,
                                const Tensor& targets, std::int64_t vocab_start,
                                std::int64_t vocab_size, std::int32_t ignore_index) {
  if (logits.size(0) == 0) return;
  if (is_bf16(logits)) {
    target_logit<BFloat16>(target_logit_out, logits, targets, vocab_start, vocab_size,
                           ignore_index);
  } else {
    target_logit<float>(target_logit_out, logits, targets, vocab_start, vocab_size, ignore_index);
  }
}

void cross_entropy_finish(Tensor& losses, Tensor& lse, const Tensor& global_max,
                          const Tensor& global_sum_exp, const Tensor& target_logit,
                          const Tensor& targets, std::int32_t ignore_index) {
  const i64 rows = targets.numel();
  if (rows == 0) return;
  cross_entropy_finish_kernel<<<element_grid(rows), kElementThreads, 0, compute_stream()>>>(
      losses.data<float>(), lse.data<float>(), global_max.data<float>(),
      global_sum_exp.data<float>(), target_logit.data<float>(), targets.data<std::int32_t>(), rows,
      ignore_index);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace ternion::cuda
