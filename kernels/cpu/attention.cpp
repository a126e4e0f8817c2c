// Causal attention, one task per (batch, head): a head's query, key and value columns of qkv
// and its output columns of out and dqkv belong to that task alone, so tasks never share a
// write and every sum runs in a fixed order. FlashAttention's contract (kernels/attention.h):
// the forward keeps each row's log-sum-exp, the backward recomputes the probabilities from it.
//
// Each task works through its head with BLAS, as FlashAttention does per tile, on a [T, T]
// scratch of its own thread (nothing of that size outlives the call):
//   forward   S = scale Q K^T;  P = causal_softmax(S) (0 above the diagonal), lse;  O = P V
//   backward  S = scale Q K^T;  P = exp(S - lse) (0 above);  dV = P^T dO;  dP = dO V^T;
//             dS = P (dP - D) scale with D_i = dO_i . O_i;  dQ = dS K;  dK = dS^T Q
// The heads are column slices of qkv, out and dqkv rows, handed to BLAS with their row
// strides; BLAS runs single-threaded inside the task (OpenBLAS does so within an OpenMP
// region), so a head's sums do not depend on the thread count. The products cover the whole
// [T, T] square (the zeros above the diagonal included): twice the causal FLOPs, at GEMM
// speed rather than a dot product per (i, j).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vector_math.h"

namespace ternion::cpu {

namespace {

template <class T>
T dot(const T* a, const T* b, i64 n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (i64 i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Pointers into one (batch, head): row t of q, k or v is at base + t * row_stride.
struct HeadView {
  i64 row_stride;  // 3 * n_head * head_size
  i64 q, k, v;     // column offsets of the head's q, k and v within a qkv row
};

HeadView head_view(i64 n_head, i64 head_size, i64 h) {
  return {3 * n_head * head_size, h * 3 * head_size, h * 3 * head_size + head_size,
          h * 3 * head_size + 2 * head_size};
}

}  // namespace

template <class T>
void attention_forward(T* out, T* lse, const T* qkv, i64 batch, i64 seq, i64 n_head,
                       i64 head_size) {
  const T scale = static_cast<T>(1) / std::sqrt(static_cast<T>(head_size));
  const i64 channels = n_head * head_size;
#pragma omp parallel
  {
    std::vector<T> square(static_cast<std::size_t>(seq * seq));  // S, then P
    T* const p = square.data();
#pragma omp for collapse(2) schedule(static)
    for (i64 b = 0; b < batch; ++b) {
      for (i64 h = 0; h < n_head; ++h) {
        const HeadView hv = head_view(n_head, head_size, h);
        const T* base = qkv + b * seq * hv.row_stride;
        T* o = out + b * seq * channels + h * head_size;
        matmul_strided(p, seq, base + hv.q, hv.row_stride, base + hv.k, hv.row_stride, seq, seq,
                       head_size, false, true, scale, T{0});
        for (i64 i = 0; i < seq; ++i) {
          T* row = p + i * seq;
          T max_score = -std::numeric_limits<T>::infinity();
          for (i64 j = 0; j <= i; ++j) max_score = row[j] > max_score ? row[j] : max_score;
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (i64 j = 0; j <= i; ++j) {
            row[j] = fast_exp_bounded(row[j] - max_score);
            sum += row[j];
          }
          lse[(b * n_head + h) * seq + i] = max_score + std::log(sum);
          const T inv_sum = static_cast<T>(1) / sum;
          for (i64 j = 0; j <= i; ++j) row[j] *= inv_sum;
          for (i64 j = i + 1; j < seq; ++j) row[j] = 0;
        }
        matmul_strided(o, channels, p, seq, base + hv.v, hv.row_stride, seq, head_size, seq,
                       false, false, T{1}, T{0});
      }
    }
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        i64 batch, i64 seq, i64 n_head, i64 head_size) {
  const T scale = static_cast<T>(1) / std::sqrt(static_cast<T>(head_size));
  const i64 channels = n_head * head_size;
#pragma omp parallel
  {
    std::vector<T> probs(static_cast<std::size_t>(seq * seq)), grads(probs.size());
    T* const p = probs.data();   // S, then P
    T* const dp = grads.data();  // dP, then dS
#pragma omp for collapse(2) schedule(static)
    for (i64 b = 0; b < batch; ++b) {
      for (i64 h = 0; h < n_head; ++h) {
        const HeadView hv = head_view(n_head, head_size, h);
        const i64 ld = hv.row_stride;
        const T* base = qkv + b * seq * ld;
        T* dbase = dqkv + b * seq * ld;
        const T* dout_h = dout + b * seq * channels + h * head_size;
        const T* out_h = out + b * seq * channels + h * head_size;
        matmul_strided(p, seq, base + hv.q, ld, base + hv.k, ld, seq, seq, head_size, false, true,
                       scale, T{0});
        for (i64 i = 0; i < seq; ++i) {
          T* row = p + i * seq;
          const T row_lse = lse[(b * n_head + h) * seq + i];
#pragma omp simd
          for (i64 j = 0; j <= i; ++j) row[j] = fast_exp_bounded(row[j] - row_lse);
          for (i64 j = i + 1; j < seq; ++j) row[j] = 0;
        }
        // dV = P^T dO and dP = dO V^T (the overwrite of dqkv's dv columns: beta 0).
        matmul_strided(dbase + hv.v, ld, p, seq, dout_h, channels, seq, head_size, seq, true,
                       false, T{1}, T{0});
        matmul_strided(dp, seq, dout_h, channels, base + hv.v, ld, seq, seq, head_size, false,
                       true, T{1}, T{0});
        // Softmax backward: dS_ij = P_ij (dP_ij - D_i) scale, where D_i = sum_j P_ij dP_ij =
        // dO_i . O_i since O_i = sum_j P_ij V_j.
        for (i64 i = 0; i < seq; ++i) {
          const T d_i = dot(dout_h + i * channels, out_h + i * channels, head_size);
          const T* prow = p + i * seq;
          T* row = dp + i * seq;
#pragma omp simd
          for (i64 j = 0; j <= i; ++j) row[j] = prow[j] * (row[j] - d_i) * scale;
          for (i64 j = i + 1; j < seq; ++j) row[j] = 0;
        }
        matmul_strided(dbase + hv.q, ld, dp, seq, base + hv.k, ld, seq, head_size, seq, false,
                       false, T{1}, T{0});
        matmul_strided(dbase + hv.k, ld, dp, seq, base + hv.q, ld, seq, head_size, seq, true,
                       false, T{1}, T{0});
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, i64, i64, i64, i64);
template void attention_forward<double>(double*, double*, const double*, i64, i64, i64, i64);
template void attention_backward<float>(float*, const float*, const float*, const float*,
                                        const float*, i64, i64, i64, i64);
template void attention_backward<double>(double*, const double*, const double*, const double*,
                                         const double*, i64, i64, i64, i64);

}  // namespace ternion::cpu
