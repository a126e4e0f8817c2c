// Causal attention, one task per (batch, head): a head's query, key and value columns of qkv
// and its output columns of out and dqkv belong to that task alone, so tasks never share a
// write and every sum runs in a fixed order. Rows i only visit keys j <= i. The backward
// recomputes each probability from the saved log-sum-exp (kernels/attention.h). A row's
// scratch is reached through a raw pointer: through std::vector's operator[] GCC does not
// vectorise the exp loops, which then cost more than the dot products.
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

template <class T>
void axpy(T* y, T alpha, const T* x, i64 n) {
  for (i64 i = 0; i < n; ++i) y[i] += alpha * x[i];
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
    std::vector<T> row(static_cast<std::size_t>(seq));
    T* const p = row.data();  // one query row's scores, then exp (a raw pointer: see below)
#pragma omp for collapse(2) schedule(static)
    for (i64 b = 0; b < batch; ++b) {
      for (i64 h = 0; h < n_head; ++h) {
        const HeadView hv = head_view(n_head, head_size, h);
        const T* base = qkv + b * seq * hv.row_stride;
        for (i64 i = 0; i < seq; ++i) {
          const T* q = base + i * hv.row_stride + hv.q;
          T max_score = -std::numeric_limits<T>::infinity();
          for (i64 j = 0; j <= i; ++j) {
            p[j] = dot(q, base + j * hv.row_stride + hv.k, head_size) * scale;
            max_score = p[j] > max_score ? p[j] : max_score;
          }
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (i64 j = 0; j <= i; ++j) {
            p[j] = fast_exp(p[j] - max_score);
            sum += p[j];
          }
          lse[(b * n_head + h) * seq + i] = max_score + std::log(sum);
          const T inv_sum = static_cast<T>(1) / sum;
          T* o = out + (b * seq + i) * channels + h * head_size;
          for (i64 d = 0; d < head_size; ++d) o[d] = 0;
          for (i64 j = 0; j <= i; ++j)
            axpy(o, p[j] * inv_sum, base + j * hv.row_stride + hv.v, head_size);
        }
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
    std::vector<T> row(static_cast<std::size_t>(seq));
    T* const p = row.data();  // one query row's probabilities
#pragma omp for collapse(2) schedule(static)
    for (i64 b = 0; b < batch; ++b) {
      for (i64 h = 0; h < n_head; ++h) {
        const HeadView hv = head_view(n_head, head_size, h);
        const T* base = qkv + b * seq * hv.row_stride;
        T* dbase = dqkv + b * seq * hv.row_stride;
        for (i64 t = 0; t < seq; ++t) {
          T* grad_row = dbase + t * hv.row_stride + hv.q;  // this head's dq, dk, dv: contiguous
          for (i64 d = 0; d < 3 * head_size; ++d) grad_row[d] = 0;
        }
        for (i64 i = 0; i < seq; ++i) {
          const T* q_i = base + i * hv.row_stride + hv.q;
          T* dq_i = dbase + i * hv.row_stride + hv.q;
          const T* dout_i = dout + (b * seq + i) * channels + h * head_size;
          // The row's probabilities again: scores as the forward computed them, then one
          // vectorised exp against the saved log-sum-exp.
          const T row_lse = lse[(b * n_head + h) * seq + i];
          for (i64 j = 0; j <= i; ++j)
            p[j] = dot(q_i, base + j * hv.row_stride + hv.k, head_size) * scale;
#pragma omp simd
          for (i64 j = 0; j <= i; ++j) p[j] = fast_exp(p[j] - row_lse);
          // D_i = sum_j p_ij dp_ij = dout_i . out_i, since out_i = sum_j p_ij v_j.
          const T d_i = dot(dout_i, out + (b * seq + i) * channels + h * head_size, head_size);
          for (i64 j = 0; j <= i; ++j) {
            const T* k_j = base + j * hv.row_stride + hv.k;
            const T dp = dot(dout_i, base + j * hv.row_stride + hv.v, head_size);
            axpy(dbase + j * hv.row_stride + hv.v, p[j], dout_i, head_size);  // dv_j += p dout_i
            // Softmax backward: ds_ij = p_ij (dp_ij - D_i) * scale, s_ij = scale q_i . k_j.
            const T ds = p[j] * (dp - d_i) * scale;
            axpy(dq_i, ds, k_j, head_size);
            axpy(dbase + j * hv.row_stride + hv.k, ds, q_i, head_size);
          }
        }
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
