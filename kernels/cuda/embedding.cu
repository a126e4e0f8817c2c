// Token and position embeddings on CUDA: the CPU op's math (kernels/cpu/embedding.cpp, contract
// in kernels/embedding.h).
//
//   token forward      out[n, :] = wte[tokens[n] - vocab_start] or 0 outside the shard
//   token backward     dwte[row] += dout[n, :] for every n whose token is in the shard
//   position forward   out[b, t, :] += wpe[t]
//   position backward  dwpe[t] += sum_b dout[b, t, :]
//
// dtypes: wte, out, wpe and dout F32 or BF16 (wpe the dtype of out); dwte, dwpe F32.
//
// Both backward passes are deterministic (no float atomics). The position backward adds in the
// CPU's order, so with F32 it matches it bit for bit. The token backward sorts (token, n) pairs
// by token with CUB's radix sort, which is stable: within a token the positions n stay
// ascending. The sorted entries are cut into segments of kSegmentRows; a run of equal tokens
// belongs to the block of its first entry, which adds the run's entries in its own segment to
// dwte in order (the CPU's order, so a run within one segment gives the CPU's bits), then the
// sums of the run's entries in each later segment, computed in parallel beforehand, in segment
// order. A frequent token (a space in a byte-level corpus: thousands of rows per batch) so
// costs one segment's serial walk plus a few additions, not one block walking every row.
#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"

namespace ternion::cuda {

namespace {

using i64 = std::int64_t;

constexpr int kThreadsPerBlock = 256;
constexpr i64 kMaxBlocks = 1 << 20;  // elementwise kernels stride over the rest

using detail::from_float;
using detail::to_float;

unsigned elementwise_blocks(i64 n) {
  const i64 blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Element i of out [n_tokens, C] is (n, c) = (i / C, i % C); a copy of the bits, no rounding.
template <class Elem>
__global__ void token_embedding_forward_kernel(Elem* out, const std::int32_t* tokens,
                                               const Elem* wte, i64 n_elements, i64 vocab_rows,
                                               i64 channels, i64 vocab_start) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_elements;
       i += stride) {
    const i64 n = i / channels, c = i % channels;
    const i64 row = static_cast<i64>(tokens[n]) - vocab_start;
    out[i] = row >= 0 && row < vocab_rows ? wte[row * channels + c] : Elem{};
  }
}

__global__ void iota_kernel(std::int32_t* values, i64 n) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    values[i] = static_cast<std::int32_t>(i);
}

// Rows of sorted entries per segment: long enough that a short run's block does one serial
// walk, short enough that a long run's is cheap.
constexpr i64 kSegmentRows = 64;

// Block k sums the entries of segment k that continue a run begun in an earlier segment (its
// leading entries equal to the previous segment's last token) into segment_sums[k, :]; the
// run's block adds them. Nothing to do where segment k starts a run.
template <class Elem>
__global__ void token_embedding_segment_sums_kernel(float* segment_sums, const Elem* dout,
                                                    const std::int32_t* sorted_tokens,
                                                    const std::int32_t* sorted_positions,
                                                    i64 n_tokens, i64 vocab_rows, i64 channels,
                                                    i64 vocab_start) {
  const i64 begin = static_cast<i64>(blockIdx.x) * kSegmentRows;
  if (begin == 0) return;
  const std::int32_t token = sorted_tokens[begin];
  if (sorted_tokens[begin - 1] != token) return;  // a run starts here
  const i64 row = static_cast<i64>(token) - vocab_start;
  if (row < 0 || row >= vocab_rows) return;  // another shard's token: nobody reads the sums
  const i64 limit = begin + kSegmentRows < n_tokens ? begin + kSegmentRows : n_tokens;
  i64 end = begin + 1;
  while (end < limit && sorted_tokens[end] == token) ++end;
  float* dst = segment_sums + static_cast<i64>(blockIdx.x) * channels;
  for (i64 c = threadIdx.x; c < channels; c += blockDim.x) {
    float sum = 0.0f;
    for (i64 j = begin; j < end; ++j)
      sum += to_float(dout[static_cast<i64>(sorted_positions[j]) * channels + c]);
    dst[c] = sum;
  }
}

// Block i handles sorted entry i if it starts a run of equal tokens (else it leaves at once):
// dwte[row, c] += dout[n, c] for the run's positions n within this segment in ascending order,
// as the CPU adds them, then += the sums of each later segment the run reaches, in order.
template <class Elem>
__global__ void token_embedding_backward_kernel(float* dwte, const Elem* dout,
                                                const float* segment_sums,
                                                const std::int32_t* sorted_tokens,
                                                const std::int32_t* sorted_positions,
                                                i64 n_tokens, i64 vocab_rows, i64 channels,
                                                i64 vocab_start) {
  const i64 first = blockIdx.x;
  const std::int32_t token = sorted_tokens[first];
  if (first > 0 && sorted_tokens[first - 1] == token) return;  // inside another block's run
  const i64 row = static_cast<i64>(token) - vocab_start;
  if (row < 0 || row >= vocab_rows) return;  // another shard's token
  const i64 segment = first / kSegmentRows;
  const i64 segment_end =
      (segment + 1) * kSegmentRows < n_tokens ? (segment + 1) * kSegmentRows : n_tokens;
  i64 end = first + 1;
  while (end < segment_end && sorted_tokens[end] == token) ++end;
  // The run reaches segment k > segment exactly when k's first entry is this token (sorted).
  i64 last_segment = segment;
  while ((last_segment + 1) * kSegmentRows < n_tokens &&
         sorted_tokens[(last_segment + 1) * kSegmentRows] == token)
    ++last_segment;
  float* dst = dwte + row * channels;
  for (i64 c = threadIdx.x; c < channels; c += blockDim.x) {
    float sum = dst[c];
    for (i64 j = first; j < end; ++j)
      sum += to_float(dout[static_cast<i64>(sorted_positions[j]) * channels + c]);
    for (i64 k = segment + 1; k <= last_segment; ++k) sum += segment_sums[k * channels + c];
    dst[c] = sum;
  }
}

// out [B, T, C] += wpe[t]; element i is at t = (i / C) % T, c = i % C.
template <class Elem>
__global__ void position_embedding_forward_kernel(Elem* out, const Elem* wpe, i64 n_elements,
                                                  i64 seq, i64 channels) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_elements;
       i += stride) {
    const i64 t = (i / channels) % seq, c = i % channels;
    out[i] = from_float<Elem>(to_float(out[i]) + to_float(wpe[t * channels + c]));
  }
}

// Thread (t, c) = (i / C, i % C) adds dout[b, t, c] for b = 0, 1, ... in order.
template <class Elem>
__global__ void position_embedding_backward_kernel(float* dwpe, const Elem* dout, i64 batch,
                                                   i64 seq, i64 channels) {
  const i64 n_table = seq * channels;
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_table;
       i += stride) {
    float sum = dwpe[i];
    for (i64 b = 0; b < batch; ++b) sum += to_float(dout[b * n_table + i]);
    dwpe[i] = sum;
  }
}

bool is_bf16(const Tensor& t) { return t.dtype() == DType::BF16; }

template <class Elem>
void token_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, i64 vocab_start) {
  const i64 n = out.numel();
  token_embedding_forward_kernel<Elem>
      <<<elementwise_blocks(n), kThreadsPerBlock, 0, compute_stream()>>>(
          out.data<Elem>(), tokens.data<std::int32_t>(), wte.data<Elem>(), n, wte.size(0),
          wte.size(1), vocab_start);
  TN_CUDA_CHECK_LAUNCH();
}

template <class Elem>
void token_backward(Tensor& dwte, const Tensor& dout, const Tensor& tokens, i64 vocab_start) {
  const i64 n_tokens = tokens.numel();
  TN_CHECK(n_tokens <= 0x7FFFFFFF, "token_embedding_backward (cuda): ", n_tokens,
           " tokens exceed 32-bit positions");
  const int n_items = static_cast<int>(n_tokens);
  const Device device = tokens.device();
  cudaStream_t stream = compute_stream();

  Tensor positions = Tensor::empty({n_tokens}, DType::I32, device);
  Tensor sorted_tokens = Tensor::empty({n_tokens}, DType::I32, device);
  Tensor sorted_positions = Tensor::empty({n_tokens}, DType::I32, device);
  iota_kernel<<<elementwise_blocks(n_tokens), kThreadsPerBlock, 0, stream>>>(
      positions.data<std::int32_t>(), n_tokens);
  TN_CUDA_CHECK_LAUNCH();

  // CUB's two calls: the first only sizes the temporary storage.
  std::size_t temp_bytes = 0;
  TN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, tokens.data<std::int32_t>(), sorted_tokens.data<std::int32_t>(),
      positions.data<std::int32_t>(), sorted_positions.data<std::int32_t>(), n_items, 0, 32,
      stream));
  const auto temp_words = static_cast<i64>((temp_bytes + sizeof(std::int32_t) - 1) /
                                           sizeof(std::int32_t));
  Tensor temp = Tensor::empty({temp_words > 0 ? temp_words : 1}, DType::I32, device);
  TN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      temp.raw_data(), temp_bytes, tokens.data<std::int32_t>(),
      sorted_tokens.data<std::int32_t>(), positions.data<std::int32_t>(),
      sorted_positions.data<std::int32_t>(), n_items, 0, 32, stream));
  TN_CUDA_CHECK_LAUNCH();

  const i64 n_segments = (n_tokens + kSegmentRows - 1) / kSegmentRows;
  Tensor segment_sums = Tensor::empty({n_segments, dwte.size(1)}, DType::F32, device);
  token_embedding_segment_sums_kernel<Elem>
      <<<static_cast<unsigned>(n_segments), kThreadsPerBlock, 0, stream>>>(
          segment_sums.data<float>(), dout.data<Elem>(), sorted_tokens.data<std::int32_t>(),
          sorted_positions.data<std::int32_t>(), n_tokens, dwte.size(0), dwte.size(1),
          vocab_start);
  TN_CUDA_CHECK_LAUNCH();
  token_embedding_backward_kernel<Elem><<<static_cast<unsigned>(n_tokens), kThreadsPerBlock, 0,
                                          stream>>>(
      dwte.data<float>(), dout.data<Elem>(), segment_sums.data<float>(),
      sorted_tokens.data<std::int32_t>(), sorted_positions.data<std::int32_t>(), n_tokens,
      dwte.size(0), dwte.size(1), vocab_start);
  TN_CUDA_CHECK_LAUNCH();
  // The scratch tensors return to the caching allocator here; only later work on the compute
  // stream can reuse them.
}

template <class Elem>
void position_forward(Tensor& out, const Tensor& wpe) {
  const i64 n = out.numel();
  position_embedding_forward_kernel<Elem>
      <<<elementwise_blocks(n), kThreadsPerBlock, 0, compute_stream()>>>(
          out.data<Elem>(), wpe.data<Elem>(), n, out.size(1), out.size(2));
  TN_CUDA_CHECK_LAUNCH();
}

template <class Elem>
void position_backward(Tensor& dwpe, const Tensor& dout) {
  const i64 n_table = dout.size(1) * dout.size(2);
  position_embedding_backward_kernel<Elem>
      <<<elementwise_blocks(n_table), kThreadsPerBlock, 0, compute_stream()>>>(
          dwpe.data<float>(), dout.data<Elem>(), dout.size(0), dout.size(1), dout.size(2));
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void token_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                             std::int64_t vocab_start) {
  if (out.numel() == 0) return;
  if (is_bf16(wte)) {
    token_forward<BFloat16>(out, tokens, wte, vocab_start);
  } else {
    token_forward<float>(out, tokens, wte, vocab_start);
  }
}

void token_embedding_backward(Tensor& dwte, const Tensor& dout, const Tensor& tokens,
                              std::int64_t vocab_start) {
  if (dout.numel() == 0) return;
  if (is_bf16(dout)) {
    token_backward<BFloat16>(dwte, dout, tokens, vocab_start);
  } else {
    token_backward<float>(dwte, dout, tokens, vocab_start);
  }
}

void position_embedding_forward(Tensor& out, const Tensor& wpe) {
  if (out.numel() == 0) return;
  if (is_bf16(out)) {
    position_forward<BFloat16>(out, wpe);
  } else {
    position_forward<float>(out, wpe);
  }
}

void position_embedding_backward(Tensor& dwpe, const Tensor& dout) {
  if (dout.numel() == 0) return;
  if (is_bf16(dout)) {
    position_backward<BFloat16>(dwpe, dout);
  } else {
    position_backward<float>(dwpe, dout);
  }
}

}  // namespace ternion::cuda
