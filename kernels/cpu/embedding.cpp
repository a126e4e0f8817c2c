// Token and position embeddings. The backward passes are deterministic by construction: the
// token backward gives each task a block of columns and walks the tokens in order, so every
// dwte element sums its contributions in token order; the position backward gives each task
// whole positions and sums the batch in order.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"

namespace ternion::cpu {

namespace {
constexpr i64 kColumnBlock = 64;
constexpr i64 kMinParallelElements = 1 << 14;
}  // namespace

template <class T>
void token_embedding_forward(T* out, const std::int32_t* tokens, const T* wte, i64 n_tokens,
                             i64 vocab_rows, i64 channels, i64 vocab_start) {
#pragma omp parallel for schedule(static) if (n_tokens * channels >= kMinParallelElements)
  for (i64 n = 0; n < n_tokens; ++n) {
    const i64 row = static_cast<i64>(tokens[n]) - vocab_start;
    T* o = out + n * channels;
    if (row >= 0 && row < vocab_rows) {
      std::copy(wte + row * channels, wte + (row + 1) * channels, o);
    } else {
      std::fill(o, o + channels, static_cast<T>(0));
    }
  }
}

template <class T>
void token_embedding_backward(T* dwte, const T* dout, const std::int32_t* tokens, i64 n_tokens,
                              i64 vocab_rows, i64 channels, i64 vocab_start) {
  const i64 n_blocks = (channels + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (n_tokens * channels >= kMinParallelElements)
  for (i64 block = 0; block < n_blocks; ++block) {
    const i64 c0 = block * kColumnBlock;
    const i64 width = std::min(kColumnBlock, channels - c0);
    for (i64 n = 0; n < n_tokens; ++n) {
      const i64 row = static_cast<i64>(tokens[n]) - vocab_start;
      if (row < 0 || row >= vocab_rows) continue;  // another shard's token
      T* dst = dwte + row * channels + c0;
      const T* src = dout + n * channels + c0;
      #pragma omp simd
      for (i64 c = 0; c < width; ++c) dst[c] += src[c];
    }
  }
}

template <class T>
void position_embedding_forward(T* out, const T* wpe, i64 batch, i64 seq, i64 channels) {
#pragma omp parallel for collapse(2) \
    schedule(static) if (batch * seq * channels >= kMinParallelElements)
  for (i64 b = 0; b < batch; ++b) {
    for (i64 t = 0; t < seq; ++t) {
      T* o = out + (b * seq + t) * channels;
      const T* w = wpe + t * channels;
      #pragma omp simd
      for (i64 c = 0; c < channels; ++c) o[c] += w[c];
    }
  }
}

template <class T>
void position_embedding_backward(T* dwpe, const T* dout, i64 batch, i64 seq, i64 channels) {
#pragma omp parallel for schedule(static) if (batch * seq * channels >= kMinParallelElements)
  for (i64 t = 0; t < seq; ++t) {
    T* dw = dwpe + t * channels;
    for (i64 b = 0; b < batch; ++b) {
      const T* d = dout + (b * seq + t) * channels;
      #pragma omp simd
      for (i64 c = 0; c < channels; ++c) dw[c] += d[c];
    }
  }
}

template void token_embedding_forward<float>(float*, const std::int32_t*, const float*, i64, i64,
                                             i64, i64);
template void token_embedding_forward<double>(double*, const std::int32_t*, const double*, i64, i64,
                                              i64, i64);
template void token_embedding_backward<float>(float*, const float*, const std::int32_t*, i64, i64,
                                              i64, i64);
template void token_embedding_backward<double>(double*, const double*, const std::int32_t*, i64,
                                               i64, i64, i64);
template void position_embedding_forward<float>(float*, const float*, i64, i64, i64);
template void position_embedding_forward<double>(double*, const double*, i64, i64, i64);
template void position_embedding_backward<float>(float*, const float*, i64, i64, i64);
template void position_embedding_backward<double>(double*, const double*, i64, i64, i64);

}  // namespace ternion::cpu
