// Inverted dropout on CUDA (contract in kernels/dropout.h): the mask comes from the same
// Philox stream and the same global element index as the CPU's (kernels/dropout_math.h's
// dropout_keep: a thread per element calls Philox for its 16 bits alone), so it is the CPU's
// mask bit for bit, and so is every output: a kept element is x * dropout_scale, one rounded
// F32 multiply (then one rounding to BF16 for BF16 tensors), on both devices.
//
//   forward   out = mask * x * scale      (out may alias x)
//   backward  dx  = mask * dout * scale   (dx may alias dout)
//
// dtypes: in and out one dtype, F32 or BF16. p == 0 is an exact copy that spends no RNG.
#include <cstdint>

#include "framework/bfloat16.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/dropout_math.h"

namespace ternion::cuda {

namespace {

using i64 = std::int64_t;

constexpr int kThreadsPerBlock = 256;
constexpr i64 kMaxBlocks = 1 << 20;  // the kernel strides over the rest

using detail::from_float;
using detail::to_float;

// The local [batch, seq, channels] tensor's element i is (b, t, c); its global index uses
// sample_offset + b and seq_offset + t in the global [B_global, seq_total, channels] tensor.
struct Layout {
  i64 seq, channels, sample_offset, seq_offset, seq_total;
};

// out may alias in: each element is read, then written, by one thread.
template <class Elem>
__global__ void dropout_kernel(Elem* out, const Elem* in, i64 n, std::uint32_t threshold,
                               float scale,
                               RngStream stream, Layout layout) {
  const i64 grid_stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += grid_stride) {
    const i64 c = i % layout.channels;
    const i64 bt = i / layout.channels;
    const i64 t = bt % layout.seq, b = bt / layout.seq;
    const std::uint64_t index =
        dropout_global_index(layout.sample_offset + b, layout.seq_offset + t, layout.seq_total,
                             layout.channels, c);
    const bool keep = dropout_keep(stream, index, threshold);
    out[i] = keep ? from_float<Elem>(to_float(in[i]) * scale) : Elem{};
  }
}

template <class Elem>
void apply_dropout_mask(Tensor& out, const Tensor& in, float p, RngStream stream,
                        const GlobalPosition& position) {
  const i64 n = in.numel();
  if (n == 0) return;
  if (p == 0.0f) {  // an exact copy, as on the CPU
    if (out.raw_data() != in.raw_data()) out.copy_from(in);
    return;
  }
  const std::uint32_t threshold = dropout_threshold(p);
  const float scale = dropout_scale<float>(threshold);  // the CPU's, evaluated on the host
  const Layout layout{in.size(1), in.size(2), position.sample_offset, position.seq_offset,
                      position.seq_total};
  i64 blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  dropout_kernel<Elem><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, compute_stream()>>>(
      out.data<Elem>(), in.data<Elem>(), n, threshold, scale, stream, layout);
  TN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void dropout_forward(Tensor& out, const Tensor& x, float p, RngStream stream,
                     const GlobalPosition& position) {
  if (x.dtype() == DType::BF16) {
    apply_dropout_mask<BFloat16>(out, x, p, stream, position);
  } else {
    apply_dropout_mask<float>(out, x, p, stream, position);
  }
}

void dropout_backward(Tensor& dx, const Tensor& dout, float p, RngStream stream,
                      const GlobalPosition& position) {
  if (dout.dtype() == DType::BF16) {
    apply_dropout_mask<BFloat16>(dx, dout, p, stream, position);
  } else {
    apply_dropout_mask<float>(dx, dout, p, stream, position);
  }
}

}  // namespace ternion::cuda
