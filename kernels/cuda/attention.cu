// Causal self-attention on CUDA (contract in kernels/attention.h). Two implementations:
// cuDNN's fused flash attention (cudnn_attention.h; bf16, where cuDNN supports the shape) and
// the portable path here, batched cuBLAS GEMMs with fused softmax kernels, the CPU op's math
// step for step (kernels/cpu/attention.cpp). attention_forward/backward pick one per call.
//
// The cuBLAS path:
//   forward   heads = split(qkv)                  [3, B, H, T, hs]  (q, k, v contiguous per head)
//             scores = q @ k^T                    [B, H, T, T]      (F32)
//             probs, lse = causal_softmax(scale * scores)           (exact 0 above the diagonal)
//             y     = probs @ v                   [B, H, T, hs]
//             out   = merge(y)                    [B, T, H * hs]
//   backward  scores = q @ k^T;  probs = exp(scale * scores - lse)  (recomputed, 0 above)
//             dprobs  = dout_h @ v^T              [B, H, T, T]      (F32)
//             dv      = probs^T @ dout_h
//             dscores = probs * (dprobs - D) * scale,  D_i = dout_i . out_i   (0 above)
//             dq = dscores @ k,  dk = dscores^T @ q
//             dqkv    = merge(dq, dk, dv)         overwritten, every element
//
// dtypes: qkv, out, dout, dqkv all F32 or all BF16; lse F32. Scores and dprobs are F32 in both
// cases (cuBLAS writes F32 from BF16 operands) and the softmaxes compute in F32; with BF16 the
// GEMM operands (probs, dscores) are rounded to BF16, as the GEMMs need one operand dtype.
// GEMMs accumulate in F32 (CUBLAS_COMPUTE_32F; no TF32, so F32 matches the CPU closely).
//
// Scratch buffers come from Tensor::empty on the device (the caching allocator); everything
// runs on the compute stream, so a buffer freed here is reused only by later work on it.
#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/logging.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/vector_math.h"

namespace ternion::cuda {

namespace {

constexpr int kWarpSize = 32;
constexpr int kThreadsPerBlock = 256;
constexpr int kRowsPerBlock = kThreadsPerBlock / kWarpSize;  // softmax: one warp per row

struct Dims {
  int batch, seq, n_head, head_size;
};

Dims attention_dims(const Tensor& qkv, std::int64_t n_head) {
  const std::int64_t batch = qkv.size(0), seq = qkv.size(1);
  const std::int64_t head_size = qkv.size(2) / (3 * n_head);
  constexpr std::int64_t kIntMax = 2147483647;
  TN_CHECK(batch * n_head <= kIntMax && seq <= kIntMax && head_size <= kIntMax,
           "attention (cuda): ", qkv.str(), " with ", n_head,
           " heads exceeds cuBLAS's 32-bit sizes");
  return {static_cast<int>(batch), static_cast<int>(seq), static_cast<int>(n_head),
          static_cast<int>(head_size)};
}

// Element types: F32 or BF16 storage, F32 math (element_access.cuh).
using detail::from_float;
using detail::to_float;

template <class Elem>
constexpr cudaDataType cuda_dtype() {
  return std::is_same_v<Elem, float> ? CUDA_R_32F : CUDA_R_16BF;
}

// --- Layout kernels ---------------------------------------------------------------------------
//
// rows  [B, T, H, P, hs]: qkv (P = 3, per-head [q|k|v]) or out / dout (P = 1)
// heads [P, B, H, T, hs]: part p of head (b, h) is one contiguous [T, hs] matrix
// Thread e handles heads element e = (((p * B + b) * H + h) * T + t) * hs + d, whose row-layout
// index is (((b * T + t) * H + h) * P + p) * hs + d.

struct LayoutIndex {
  std::int64_t heads, rows;
};

__device__ inline LayoutIndex layout_index(std::int64_t e, int parts, Dims d) {
  const std::int64_t dim = e % d.head_size;
  std::int64_t rest = e / d.head_size;
  const std::int64_t t = rest % d.seq;
  rest /= d.seq;
  const std::int64_t h = rest % d.n_head;
  rest /= d.n_head;
  const std::int64_t b = rest % d.batch;
  const std::int64_t p = rest / d.batch;
  return {e, (((b * d.seq + t) * d.n_head + h) * parts + p) * d.head_size + dim};
}

template <class Elem>
__global__ void heads_from_rows_kernel(Elem* heads, const Elem* rows, std::int64_t n, int parts,
                                       Dims d) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const LayoutIndex at = layout_index(e, parts, d);
  heads[at.heads] = rows[at.rows];
}

template <class Elem>
__global__ void rows_from_heads_kernel(Elem* rows, const Elem* heads, std::int64_t n, int parts,
                                       Dims d) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const LayoutIndex at = layout_index(e, parts, d);
  rows[at.rows] = heads[at.heads];
}

unsigned int blocks_for(std::int64_t n, int per_block) {
  return static_cast<unsigned int>((n + per_block - 1) / per_block);
}

// `heads` is [P, B, H, T, hs]; P (3 or 1) says which row layout `rows` has.
template <class Elem>
void heads_from_rows(Tensor& heads, const Tensor& rows, Dims d) {
  const std::int64_t n = heads.numel();
  const int parts = static_cast<int>(heads.size(0));
  heads_from_rows_kernel<Elem><<<blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0,
                                 compute_stream()>>>(heads.data<Elem>(), rows.data<Elem>(), n,
                                                     parts, d);
  TN_CUDA_CHECK_LAUNCH();
}

template <class Elem>
void rows_from_heads(Tensor& rows, const Tensor& heads, Dims d) {
  const std::int64_t n = heads.numel();
  const int parts = static_cast<int>(heads.size(0));
  rows_from_heads_kernel<Elem><<<blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0,
                                 compute_stream()>>>(rows.data<Elem>(), heads.data<Elem>(), n,
                                                     parts, d);
  TN_CUDA_CHECK_LAUNCH();
}

// --- Softmax kernels: one warp per row of [B * H * T, T]; row r is query i = r % T ------------
//
// The xor butterfly leaves every lane with the same bits (each step adds the same two values
// in either order), so all lanes scale by the same sum.

__device__ inline float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// probs[r, j] = softmax_{j<=i}(scale * scores[r, j]), 0 for j > i; lse[r] = its log-sum-exp.
// For F32, probs and scores may be one buffer: every read of the row happens before the warp's
// first reduction, and the last loop reads each element in the lane that then writes it.
template <class Out>
__global__ void causal_softmax_kernel(Out* probs, float* lse, const float* scores,
                                      std::int64_t n_rows, int seq, float scale) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= n_rows) return;  // the whole warp leaves: `row` is the same in every lane
  const int lane = threadIdx.x % kWarpSize;
  const int i = static_cast<int>(row % seq);
  const float* s = scores + row * seq;
  Out* p = probs + row * seq;

  float max_score = -INFINITY;
  for (int j = lane; j <= i; j += kWarpSize) max_score = fmaxf(max_score, s[j] * scale);
  max_score = warp_max(max_score);
  float sum = 0.0f;
  for (int j = lane; j <= i; j += kWarpSize) sum += fast_exp(s[j] * scale - max_score);
  sum = warp_sum(sum);  // j = 0 is always in: sum >= 1
  const float inv_sum = 1.0f / sum;
  for (int j = lane; j < seq; j += kWarpSize)
    p[j] = from_float<Out>(j <= i ? fast_exp(s[j] * scale - max_score) * inv_sum : 0.0f);
  if (lane == 0) lse[row] = max_score + logf(sum);
}

// probs[r, j] = exp(scale * scores[r, j] - lse[r]) for j <= i, 0 above: the forward's
// probabilities again, from its log-sum-exp. In place for F32 as above.
template <class Out>
__global__ void causal_probs_from_lse_kernel(Out* probs, const float* scores, const float* lse,
                                             std::int64_t n_rows, int seq, float scale) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= n_rows) return;
  const int lane = threadIdx.x % kWarpSize;
  const int i = static_cast<int>(row % seq);
  const float row_lse = lse[row];
  const float* s = scores + row * seq;
  Out* p = probs + row * seq;
  for (int j = lane; j < seq; j += kWarpSize)
    p[j] = from_float<Out>(j <= i ? fast_exp(s[j] * scale - row_lse) : 0.0f);
}

// dscores[r, j] = probs[r, j] * (dprobs[r, j] - D_r) * scale for j <= i, 0 above, with
// D_r = dout_r . out_r (= sum_k probs[r, k] dprobs[r, k], as out_r = sum_k probs[r, k] v_k).
// Row r = (b * H + h) * T + i: dout_heads row r is [B, H, T, hs]'s, out's is the rows layout
// [B, T, H, hs]. For F32, dscores and dprobs may be one buffer (as above).
template <class Elem>
__global__ void causal_softmax_backward_kernel(Elem* dscores, const float* dprobs,
                                               const Elem* probs, const Elem* dout_heads,
                                               const Elem* out, std::int64_t n_rows, Dims d,
                                               float scale) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= n_rows) return;
  const int lane = threadIdx.x % kWarpSize;
  const int seq = d.seq;
  const int i = static_cast<int>(row % seq);
  const std::int64_t bh = row / seq, h = bh % d.n_head, b = bh / d.n_head;
  const Elem* dout_r = dout_heads + row * d.head_size;
  const Elem* out_r = out + ((b * seq + i) * d.n_head + h) * d.head_size;
  float d_r = 0.0f;
  for (int k = lane; k < d.head_size; k += kWarpSize)
    d_r += to_float(dout_r[k]) * to_float(out_r[k]);
  d_r = warp_sum(d_r);

  const float* dp = dprobs + row * seq;
  const Elem* p = probs + row * seq;
  Elem* ds = dscores + row * seq;
  for (int j = lane; j < seq; j += kWarpSize)
    ds[j] = from_float<Elem>(j <= i ? to_float(p[j]) * (dp[j] - d_r) * scale : 0.0f);
}

std::int64_t n_rows(Dims d) { return static_cast<std::int64_t>(d.batch) * d.n_head * d.seq; }

template <class Out>
void causal_softmax(Tensor& probs, Tensor& lse, const Tensor& scores, Dims d, float scale) {
  causal_softmax_kernel<Out><<<blocks_for(n_rows(d), kRowsPerBlock), kThreadsPerBlock, 0,
                               compute_stream()>>>(probs.data<Out>(), lse.data<float>(),
                                                   scores.data<float>(), n_rows(d), d.seq, scale);
  TN_CUDA_CHECK_LAUNCH();
}

template <class Out>
void causal_probs_from_lse(Tensor& probs, const Tensor& scores, const Tensor& lse, Dims d,
                           float scale) {
  causal_probs_from_lse_kernel<Out><<<blocks_for(n_rows(d), kRowsPerBlock), kThreadsPerBlock, 0,
                                      compute_stream()>>>(
      probs.data<Out>(), scores.data<float>(), lse.data<float>(), n_rows(d), d.seq, scale);
  TN_CUDA_CHECK_LAUNCH();
}

template <class Elem>
void causal_softmax_backward(Tensor& dscores, const Tensor& dprobs, const Tensor& probs,
                             const Tensor& dout_heads, const Tensor& out, Dims d, float scale) {
  causal_softmax_backward_kernel<Elem><<<blocks_for(n_rows(d), kRowsPerBlock), kThreadsPerBlock,
                                         0, compute_stream()>>>(
      dscores.data<Elem>(), dprobs.data<float>(), probs.data<Elem>(), dout_heads.data<Elem>(),
      out.data<Elem>(), n_rows(d), d, scale);
  TN_CUDA_CHECK_LAUNCH();
}

// --- Batched GEMMs ----------------------------------------------------------------------------

// One handle for the process, made on first use (after cuda::initialize chose the device) and
// never destroyed: destroying it from a static destructor could run after the CUDA context is
// gone. Re-bound to the compute stream on every call (cheap, and right if the stream changes).
cublasHandle_t cublas_handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t created = nullptr;
    TN_CUBLAS_CHECK(cublasCreate(&created));
    return created;
  }();
  TN_CUBLAS_CHECK(cublasSetStream(handle, compute_stream()));
  return handle;
}

// For each of `batch` matrices, row-major C [m, n] = op(A) @ op(B), where A is stored [m, k]
// (or [k, m] when transpose_a) and B [k, n] (or [n, k] when transpose_b); matrix i of each
// starts stride_* elements after matrix i - 1. A and B have dtype ab_type, C c_type (C is
// overwritten: beta = 0).
//
// cuBLAS is column-major, and a row-major [r, c] matrix with row length ld is, to cuBLAS, the
// column-major [c, r] matrix (its transpose) with leading dimension ld. So we ask cuBLAS for
// C^T = op(B)^T @ op(A)^T, all three read as column-major transposes of what we store:
//   cuBLAS's "A" is our B: transa = transpose_b, lda = B's row length = transpose_b ? k : n
//   cuBLAS's "B" is our A: transb = transpose_a, ldb = A's row length = transpose_a ? m : k
//   cuBLAS's m, n, k = n, m, k;   ldc = C's row length = n
// (With no transposes: B read column-major is B^T [n, k], A is A^T [k, m], and their product
// [n, m] is C^T. With transpose_b, B is stored [n, k]; read column-major it is [k, n] = op(B),
// and cuBLAS's op T turns it into the op(B)^T [n, k] we need. Likewise for A.)
void gemm_batched(cudaDataType ab_type, cudaDataType c_type, bool transpose_a, bool transpose_b,
                  int m, int n, int k, const void* a, long long stride_a, const void* b,
                  long long stride_b, void* c, long long stride_c, int batch) {
  const float alpha = 1.0f, beta = 0.0f;
  const int lda = transpose_b ? k : n;
  const int ldb = transpose_a ? m : k;
  TN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ab_type, lda, stride_b, a,
      ab_type, ldb, stride_a, &beta, c, c_type, n, stride_c, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

// Per (b, h), with q, k, v, y, dout_h, dq, dk, dv all [T, hs] and scores, probs, dprobs,
// dscores [T, T] (row-major, batch strides T * hs and T * T):
//   scores = q @ k^T         m = T,  n = T,  k = hs   B stored [T, hs] = [n, k]: transpose_b
//   y      = probs @ v       m = T,  n = hs, k = T
//   dprobs = dout_h @ v^T    m = T,  n = T,  k = hs   transpose_b
//   dv     = probs^T @ dout_h  m = T (keys), n = hs, k = T (queries); A stored [k, m]: transpose_a
//   dq     = dscores @ k     m = T,  n = hs, k = T
//   dk     = dscores^T @ q   m = T,  n = hs, k = T   transpose_a
struct HeadGemms {
  Dims d;
  cudaDataType elem;  // q, k, v, probs, dscores, y, dq, dk, dv
  long long head_stride() const { return static_cast<long long>(d.seq) * d.head_size; }
  long long square_stride() const { return static_cast<long long>(d.seq) * d.seq; }
  int batch() const { return d.batch * d.n_head; }

  // [T, T] (F32) = [T, hs] @ [T, hs]^T
  void square_from_heads(void* out, const void* a, const void* b) const {
    gemm_batched(elem, CUDA_R_32F, false, true, d.seq, d.seq, d.head_size, a, head_stride(), b,
                 head_stride(), out, square_stride(), batch());
  }
  // [T, hs] = op([T, T]) @ [T, hs]
  void heads_from_square(void* out, const void* square, bool transpose_square,
                         const void* b) const {
    gemm_batched(elem, elem, transpose_square, false, d.seq, d.head_size, d.seq, square,
                 square_stride(), b, head_stride(), out, head_stride(), batch());
  }
};

// Part p (q, k or v) of a [3, B, H, T, hs] tensor.
template <class Elem>
Elem* part(const Tensor& heads, int p) {
  return heads.data<Elem>() + p * (heads.numel() / 3);
}

float softmax_scale(Dims d) { return 1.0f / std::sqrt(static_cast<float>(d.head_size)); }

// The [B, H, T, T] F32 scores q @ k^T, and a buffer of the GEMM operand dtype for the
// probabilities: the scores' own for F32 (the softmax runs in place), a new one for BF16.
struct SquareBuffers {
  Tensor scores, probs;
};

template <class Elem>
SquareBuffers scores_of(const Tensor& heads, const HeadGemms& gemms, Dims d) {
  const Device device = heads.device();
  Tensor scores = Tensor::empty({d.batch, d.n_head, d.seq, d.seq}, DType::F32, device);
  gemms.square_from_heads(scores.data<float>(), part<Elem>(heads, 0), part<Elem>(heads, 1));
  Tensor probs = std::is_same_v<Elem, float>
                     ? scores
                     : Tensor::empty({d.batch, d.n_head, d.seq, d.seq}, heads.dtype(), device);
  return {scores, probs};
}

template <class Elem>
void forward(Tensor& out, Tensor& lse, const Tensor& qkv, Dims d) {
  const HeadGemms gemms{d, cuda_dtype<Elem>()};
  Tensor heads = Tensor::empty({3, d.batch, d.n_head, d.seq, d.head_size}, qkv.dtype(),
                               qkv.device());
  heads_from_rows<Elem>(heads, qkv, d);
  SquareBuffers square = scores_of<Elem>(heads, gemms, d);
  causal_softmax<Elem>(square.probs, lse, square.scores, d, softmax_scale(d));

  Tensor y = Tensor::empty({1, d.batch, d.n_head, d.seq, d.head_size}, qkv.dtype(), qkv.device());
  gemms.heads_from_square(y.data<Elem>(), square.probs.data<Elem>(), false, part<Elem>(heads, 2));
  rows_from_heads<Elem>(out, y, d);
}

template <class Elem>
void backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
              const Tensor& lse, Dims d) {
  const Device device = qkv.device();
  const DType dtype = qkv.dtype();
  const HeadGemms gemms{d, cuda_dtype<Elem>()};

  Tensor heads = Tensor::empty({3, d.batch, d.n_head, d.seq, d.head_size}, dtype, device);
  heads_from_rows<Elem>(heads, qkv, d);
  Tensor dout_heads = Tensor::empty({1, d.batch, d.n_head, d.seq, d.head_size}, dtype, device);
  heads_from_rows<Elem>(dout_heads, dout, d);
  Tensor dheads = Tensor::empty({3, d.batch, d.n_head, d.seq, d.head_size}, dtype, device);

  SquareBuffers square = scores_of<Elem>(heads, gemms, d);
  causal_probs_from_lse<Elem>(square.probs, square.scores, lse, d, softmax_scale(d));
  const Tensor& probs = square.probs;

  // dprobs reuses the F32 scores buffer when the probabilities live elsewhere (BF16).
  Tensor dprobs = std::is_same_v<Elem, float>
                      ? Tensor::empty({d.batch, d.n_head, d.seq, d.seq}, DType::F32, device)
                      : square.scores;
  gemms.square_from_heads(dprobs.data<float>(), dout_heads.data<Elem>(), part<Elem>(heads, 2));
  gemms.heads_from_square(part<Elem>(dheads, 2), probs.data<Elem>(), true,
                          dout_heads.data<Elem>());

  // dscores in the GEMM operand dtype: dprobs' own buffer for F32; for BF16 the probabilities'
  // buffer (each lane reads p[j] before writing ds[j] at the same j, nothing else reads it).
  Tensor dscores = std::is_same_v<Elem, float> ? dprobs : square.probs;
  causal_softmax_backward<Elem>(dscores, dprobs, probs, dout_heads, out, d, softmax_scale(d));
  gemms.heads_from_square(part<Elem>(dheads, 0), dscores.data<Elem>(), false,
                          part<Elem>(heads, 1));
  gemms.heads_from_square(part<Elem>(dheads, 1), dscores.data<Elem>(), true,
                          part<Elem>(heads, 0));
  rows_from_heads<Elem>(dqkv, dheads, d);
}

// Says once per reason that `auto` chose the cuBLAS path: its f32 T x T scores cost far more
// memory traffic than cuDNN's flash attention, so a run that lost cuDNN should say so.
void log_fallback_once(const std::string& why_not) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard lock(mutex);
  if (said.insert(why_not).second)
    log_info("attention: the cuBLAS path (training.attention: auto), as ", why_not);
}

// cuDNN's fused SDPA for this call? `cublas` never; `cudnn` always (or an error saying why it
// cannot); `automatic` when cuDNN supports this pass of the problem and its `operands` are
// aligned for it. Forward and backward normally agree; where they do not (a backward cuDNN
// cannot build, an unaligned view in one of them) mixing is still right: both implementations
// read and write the same lse.
bool use_cudnn(const Tensor& qkv, std::int64_t n_head, AttentionKernel kernel,
               AttentionPass pass, std::initializer_list<const Tensor*> operands) {
  if (kernel == AttentionKernel::cublas) return false;
  const std::string why_not = cudnn_attention_unsupported_reason(qkv, n_head, pass, operands);
  TN_CHECK(why_not.empty() || kernel != AttentionKernel::cudnn,
           "attention: cuDNN's fused attention was asked for (training.attention: cudnn) but ",
           why_not);
  if (!why_not.empty()) log_fallback_once(why_not);
  return why_not.empty();
}

}  // namespace

void attention_forward(Tensor& out, Tensor& lse, const Tensor& qkv, std::int64_t n_head,
                       AttentionKernel kernel) {
  const Dims d = attention_dims(qkv, n_head);
  if (qkv.numel() == 0) return;
  if (use_cudnn(qkv, n_head, kernel, AttentionPass::forward, {&out, &lse})) {
    cudnn_attention_forward(out, lse, qkv, n_head);
  } else if (qkv.dtype() == DType::BF16) {
    forward<BFloat16>(out, lse, qkv, d);
  } else {
    forward<float>(out, lse, qkv, d);
  }
}

void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                        const Tensor& lse, std::int64_t n_head, AttentionKernel kernel) {
  const Dims d = attention_dims(qkv, n_head);
  if (qkv.numel() == 0) return;
  if (use_cudnn(qkv, n_head, kernel, AttentionPass::backward, {&dqkv, &dout, &out, &lse})) {
    cudnn_attention_backward(dqkv, dout, qkv, out, lse, n_head);
  } else if (qkv.dtype() == DType::BF16) {
    backward<BFloat16>(dqkv, dout, qkv, out, lse, d);
  } else {
    backward<float>(dqkv, dout, qkv, out, lse, d);
  }
}

}  // namespace ternion::cuda
