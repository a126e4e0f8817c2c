// Rotary position embedding and grouped-query packing (kernels/rotary_qkv.h). Each task takes
// whole rows (b, t), so every output element is written by one thread, and the backward's key
// and value sums add the group's heads in order whatever the thread count. The cos/sin of every
// (t, pair) is taken once per call, outside the element loops, which then vectorise.
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rotary_qkv_math.h"

namespace ternion::cpu {

namespace {

constexpr i64 kMinParallelElements = 1 << 14;

// cos and sin [seq, head_size / 2] of position first_position + t, pair i.
template <class T>
void rotary_table(std::vector<T>& cos_table, std::vector<T>& sin_table, i64 seq, i64 head_size,
                  i64 first_position, const RotaryParameters& rope) {
  const i64 half = head_size / 2;
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  for (i64 i = 0; i < half; ++i) inv_freq[i] = rotary_inv_freq(i, head_size, rope);
  cos_table.resize(static_cast<std::size_t>(seq * half));
  sin_table.resize(cos_table.size());
#pragma omp parallel for schedule(static) if (seq * half >= kMinParallelElements)
  for (i64 t = 0; t < seq; ++t)
    for (i64 i = 0; i < half; ++i)
      rotary_cos_sin(rotary_angle(first_position + t, inv_freq[i]), cos_table[t * half + i],
                     sin_table[t * half + i]);
}

// y = x turned by (c, s) pair by pair; y may be x.
template <class T>
void rotate_head(T* y, const T* x, const T* c, const T* s, i64 half) {
  #pragma omp simd
  for (i64 i = 0; i < half; ++i)
    rotary_rotate_pair(x[i], x[i + half], c[i], s[i], y[i], y[i + half]);
}

// y = x turned back (the transpose: -s); y may be x.
template <class T>
void rotate_head_back(T* y, const T* x, const T* c, const T* s, i64 half) {
  #pragma omp simd
  for (i64 i = 0; i < half; ++i)
    rotary_rotate_pair(x[i], x[i + half], c[i], -s[i], y[i], y[i + half]);
}

template <class T>
void copy_head(T* y, const T* x, i64 head_size) {
  #pragma omp simd
  for (i64 i = 0; i < head_size; ++i) y[i] = x[i];
}

template <class T>
void add_head(T* y, const T* x, i64 head_size) {
  #pragma omp simd
  for (i64 i = 0; i < head_size; ++i) y[i] += x[i];
}

}  // namespace

template <class T>
void rotary_qkv_forward(T* packed, const T* grouped, i64 batch, i64 seq, i64 kv_heads,
                        i64 queries_per_kv, i64 head_size, i64 first_position,
                        const RotaryParameters& rope) {
  const i64 r = queries_per_kv, half = head_size / 2, rows = batch * seq;
  const i64 in_width = kv_heads * (r + 2) * head_size, out_width = kv_heads * r * 3 * head_size;
  std::vector<T> cos_table, sin_table;
  rotary_table(cos_table, sin_table, seq, head_size, first_position, rope);
#pragma omp parallel for schedule(static) if (rows * out_width >= kMinParallelElements)
  for (i64 row = 0; row < rows; ++row) {
    const T* c = cos_table.data() + (row % seq) * half;
    const T* s = sin_table.data() + (row % seq) * half;
    for (i64 g = 0; g < kv_heads; ++g) {
      const T* group = grouped + row * in_width + g * (r + 2) * head_size;
      const T* key = group + r * head_size;
      const T* value = key + head_size;
      for (i64 i = 0; i < r; ++i) {
        T* head = packed + row * out_width + (g * r + i) * 3 * head_size;
        rotate_head(head, group + i * head_size, c, s, half);
        rotate_head(head + head_size, key, c, s, half);
        copy_head(head + 2 * head_size, value, head_size);
      }
    }
  }
}

template <class T>
void rotary_qkv_backward(T* dgrouped, const T* dpacked, i64 batch, i64 seq, i64 kv_heads,
                         i64 queries_per_kv, i64 head_size, i64 first_position,
                         const RotaryParameters& rope) {
  const i64 r = queries_per_kv, half = head_size / 2, rows = batch * seq;
  const i64 in_width = kv_heads * (r + 2) * head_size, out_width = kv_heads * r * 3 * head_size;
  std::vector<T> cos_table, sin_table;
  rotary_table(cos_table, sin_table, seq, head_size, first_position, rope);
#pragma omp parallel for schedule(static) if (rows * out_width >= kMinParallelElements)
  for (i64 row = 0; row < rows; ++row) {
    const T* c = cos_table.data() + (row % seq) * half;
    const T* s = sin_table.data() + (row % seq) * half;
    for (i64 g = 0; g < kv_heads; ++g) {
      T* group = dgrouped + row * in_width + g * (r + 2) * head_size;
      T* dkey = group + r * head_size;
      T* dvalue = dkey + head_size;
      const T* heads = dpacked + row * out_width + g * r * 3 * head_size;
      // Head 0's gradients, then heads 1 .. r-1 added in order; the key turned back once.
      copy_head(dkey, heads + head_size, head_size);
      copy_head(dvalue, heads + 2 * head_size, head_size);
      for (i64 i = 1; i < r; ++i) {
        add_head(dkey, heads + i * 3 * head_size + head_size, head_size);
        add_head(dvalue, heads + i * 3 * head_size + 2 * head_size, head_size);
      }
      rotate_head_back(dkey, dkey, c, s, half);
      for (i64 i = 0; i < r; ++i)
        rotate_head_back(group + i * head_size, heads + i * 3 * head_size, c, s, half);
    }
  }
}

template void rotary_qkv_forward<float>(float*, const float*, i64, i64, i64, i64, i64, i64,
                                        const RotaryParameters&);
template void rotary_qkv_forward<double>(double*, const double*, i64, i64, i64, i64, i64, i64,
                                         const RotaryParameters&);
template void rotary_qkv_backward<float>(float*, const float*, i64, i64, i64, i64, i64, i64,
                                         const RotaryParameters&);
template void rotary_qkv_backward<double>(double*, const double*, i64, i64, i64, i64, i64, i64,
                                          const RotaryParameters&);

}  // namespace ternion::cpu
