// CUDA causal attention against the CPU op on random qkv: out and lse forward, dqkv backward,
// for each implementation (kernels/attention.h): the cuBLAS path in F32 and BF16, cuDNN's fused
// SDPA in BF16. Shapes: a row shorter than a warp (T = 17, odd head count), rows that take
// each lane twice (T = 64), and a GPT-2-like head (hs = 64, T = 128). F32 is tight; BF16 gets
// the CPU op on the same bf16-rounded inputs, with tolerances from bf16's rounding (the
// probabilities and dscores are rounded before the GEMMs that use them). Outputs start as
// NaN, so an element the op leaves unwritten fails. Also: the two implementations' saved lse
// are interchangeable (cuDNN forward, cuBLAS backward), and asking for cuDNN where it cannot
// run is an error that says why.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "gpu_test_util.h"
#include "kernels/attention.h"
#include "kernels/cuda/cudnn_attention.h"

namespace ternion::test {
namespace {

struct AttentionCase {
  int batch, seq, n_head, head_size;
  std::string label(DType dtype) const {
    std::ostringstream s;
    s << dtype_name(dtype) << " B" << batch << " T" << seq << " H" << n_head << " hs"
      << head_size;
    return s.str();
  }
};

struct Tolerance {
  double atol, rtol;
};
struct Tolerances {
  Tolerance out, lse, dqkv;
  bool atol_scales_with_max;  // atol is relative to the tensor's largest |value|
};

double max_abs(const std::vector<float>& values) {
  double m = 0;
  for (float v : values) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

void expect_matches(const std::string& label, const std::vector<float>& got,
                    const std::vector<float>& want, Tolerance tol, bool scale_atol) {
  const double atol = scale_atol ? tol.atol * max_abs(want) : tol.atol;
  expect_close(label, got, want, atol, tol.rtol);
}

Tensor nan_tensor(const Shape& shape, DType dtype) {
  return to_gpu(Tensor::full(shape, NAN), dtype);
}

struct Inputs {
  Shape qkv_shape, out_shape, lse_shape;
  Tensor qkv, dout;  // CPU F32, rounded to bf16 for BF16 cases
};

Inputs inputs_for(const AttentionCase& c, DType dtype, std::uint64_t seed) {
  const std::int64_t channels = static_cast<std::int64_t>(c.n_head) * c.head_size;
  Inputs in{{c.batch, c.seq, 3 * channels},
            {c.batch, c.seq, channels},
            {c.batch, c.n_head, c.seq},
            random_tensor({c.batch, c.seq, 3 * channels}, seed, -2.0f, 2.0f),
            random_tensor({c.batch, c.seq, channels}, seed + 1)};
  if (dtype == DType::BF16) {
    in.qkv = round_to_bf16(in.qkv);
    in.dout = round_to_bf16(in.dout);
  }
  return in;
}

// The GPU op under `kernel` against the CPU op on the same values.
void check_against_cpu(const AttentionCase& c, DType dtype, AttentionKernel kernel,
                       std::uint64_t seed, const Tolerances& tol) {
  const std::string name = c.label(dtype) + " " + attention_kernel_name(kernel);
  const Inputs in = inputs_for(c, dtype, seed);

  // The CPU op (F32) on exactly the values the GPU op sees; its backward reads the GPU's
  // dtype of out, as the GPU backward does.
  Tensor want_out = Tensor::empty(in.out_shape), want_lse = Tensor::empty(in.lse_shape);
  attention_forward(want_out, want_lse, in.qkv, c.n_head);
  const Tensor want_out_rounded = dtype == DType::BF16 ? round_to_bf16(want_out) : want_out;
  Tensor want_dqkv = Tensor::empty(in.qkv_shape);
  attention_backward(want_dqkv, in.dout, in.qkv, want_out_rounded, want_lse, c.n_head);

  const AttentionKernelScope scope(kernel);
  const Tensor qkv = to_gpu(in.qkv, dtype), dout = to_gpu(in.dout, dtype);
  Tensor out = nan_tensor(in.out_shape, dtype), lse = nan_tensor(in.lse_shape, DType::F32);
  attention_forward(out, lse, qkv, c.n_head);
  Tensor dqkv = nan_tensor(in.qkv_shape, dtype);
  attention_backward(dqkv, dout, qkv, out, lse, c.n_head);

  expect_matches(name + " out", to_host_floats(out), want_out.to_vector(), tol.out,
                 tol.atol_scales_with_max);
  expect_close(name + " lse", to_host_floats(lse), want_lse.to_vector(), tol.lse.atol,
               tol.lse.rtol);
  expect_matches(name + " dqkv", to_host_floats(dqkv), want_dqkv.to_vector(), tol.dqkv,
                 tol.atol_scales_with_max);
}

const AttentionCase kSmall{2, 17, 3, 8};
const AttentionCase kLarger{2, 64, 4, 16};
const AttentionCase kGpt2Head{2, 128, 4, 64};

// Different summation orders (cuBLAS, warp reductions) only.
const Tolerances kF32Tolerance{{1e-6, 1e-5}, {1e-5, 1e-6}, {1e-5, 1e-5}, false};
// bf16 keeps 8 significant bits (relative rounding error <= 2^-9 ~ 2e-3): out and dqkv come
// from rounded operands (probabilities, dscores) and are rounded again; lse is F32 math on
// the same (rounded) inputs.
const Tolerances kBf16Tolerance{{5e-3, 1e-2}, {1e-4, 1e-5}, {5e-3, 1e-2}, true};

// Skips (with the reason) where cuDNN cannot run the case: a build without cudnn-frontend.
#if TN_HAVE_CUDA
#define TN_REQUIRE_CUDNN_ATTENTION(qkv_example, n_head)                                       \
  do {                                                                                         \
    TN_REQUIRE_GPU();                                                                          \
    const std::string why_not = cuda::cudnn_attention_unsupported_reason(qkv_example, n_head); \
    if (!why_not.empty()) GTEST_SKIP() << why_not;                                             \
  } while (false)
#else
// (Without CUDA the skip always returns first; naming the example keeps it "used".)
#define TN_REQUIRE_CUDNN_ATTENTION(qkv_example, n_head) \
  do {                                                  \
    TN_REQUIRE_GPU();                                   \
    (void)(qkv_example);                                \
  } while (false)
#endif

Tensor bf16_qkv_example(const AttentionCase& c) {
  return Tensor::zeros({c.batch, c.seq, 3 * c.n_head * c.head_size}, DType::BF16,
                       Device::cuda(0));
}

TEST(GpuAttention, CublasF32MatchesCpu) {
  TN_REQUIRE_GPU();
  for (const AttentionCase& c : {kSmall, kLarger, kGpt2Head})
    check_against_cpu(c, DType::F32, AttentionKernel::cublas, 31, kF32Tolerance);
}

TEST(GpuAttention, AutomaticF32IsTheCublasPath) {
  TN_REQUIRE_GPU();
  check_against_cpu(kLarger, DType::F32, AttentionKernel::automatic, 37, kF32Tolerance);
}

TEST(GpuAttention, CublasBf16MatchesCpuToItsRounding) {
  TN_REQUIRE_GPU();
  for (const AttentionCase& c : {kSmall, kLarger, kGpt2Head})
    check_against_cpu(c, DType::BF16, AttentionKernel::cublas, 51, kBf16Tolerance);
}

TEST(GpuAttention, CudnnBf16MatchesCpuToItsRounding) {
  TN_REQUIRE_CUDNN_ATTENTION(bf16_qkv_example(kGpt2Head), kGpt2Head.n_head);
  for (const AttentionCase& c : {kSmall, kLarger, kGpt2Head})
    check_against_cpu(c, DType::BF16, AttentionKernel::cudnn, 61, kBf16Tolerance);
}

// training.deterministic: false: cuDNN's other backward algorithm, the same function.
TEST(GpuAttention, CudnnNonDeterministicBackwardMatchesCpuToItsRounding) {
  TN_REQUIRE_CUDNN_ATTENTION(bf16_qkv_example(kGpt2Head), kGpt2Head.n_head);
  set_attention_deterministic(false);
  for (const AttentionCase& c : {kSmall, kLarger, kGpt2Head})
    check_against_cpu(c, DType::BF16, AttentionKernel::cudnn, 67, kBf16Tolerance);
  set_attention_deterministic(true);
}

// cuDNN's Stats and our lse are one quantity: a cuDNN forward's lse drives a cuBLAS backward
// to the cuBLAS backward's own result.
TEST(GpuAttention, CudnnLseDrivesTheCublasBackward) {
  TN_REQUIRE_CUDNN_ATTENTION(bf16_qkv_example(kGpt2Head), kGpt2Head.n_head);
  const AttentionCase& c = kGpt2Head;
  const Inputs in = inputs_for(c, DType::BF16, 71);
  const Tensor qkv = to_gpu(in.qkv, DType::BF16), dout = to_gpu(in.dout, DType::BF16);
  Tensor out = nan_tensor(in.out_shape, DType::BF16);
  Tensor cudnn_lse = nan_tensor(in.lse_shape, DType::F32);
  Tensor cublas_lse = nan_tensor(in.lse_shape, DType::F32);
  {
    const AttentionKernelScope scope(AttentionKernel::cudnn);
    attention_forward(out, cudnn_lse, qkv, c.n_head);
  }
  const AttentionKernelScope scope(AttentionKernel::cublas);
  Tensor cublas_out = nan_tensor(in.out_shape, DType::BF16);
  attention_forward(cublas_out, cublas_lse, qkv, c.n_head);
  expect_close("lse: cuDNN vs cuBLAS", to_host_floats(cudnn_lse), to_host_floats(cublas_lse),
               1e-4, 1e-5);
  Tensor dqkv_from_cudnn = nan_tensor(in.qkv_shape, DType::BF16);
  Tensor dqkv_from_cublas = nan_tensor(in.qkv_shape, DType::BF16);
  attention_backward(dqkv_from_cudnn, dout, qkv, out, cudnn_lse, c.n_head);
  attention_backward(dqkv_from_cublas, dout, qkv, out, cublas_lse, c.n_head);
  const auto want = to_host_floats(dqkv_from_cublas);
  expect_close("dqkv from cuDNN's lse vs cuBLAS's", to_host_floats(dqkv_from_cudnn), want,
               5e-3 * max_abs(want), 1e-2);
}

TEST(GpuAttention, AskingCudnnForF32SaysWhy) {
  TN_REQUIRE_GPU();
  const AttentionKernelScope scope(AttentionKernel::cudnn);
  const AttentionCase& c = kLarger;
  Tensor qkv = to_gpu(random_tensor({c.batch, c.seq, 3 * c.n_head * c.head_size}, 81), DType::F32);
  Tensor out = nan_tensor({c.batch, c.seq, c.n_head * c.head_size}, DType::F32);
  Tensor lse = nan_tensor({c.batch, c.n_head, c.seq}, DType::F32);
  try {
    attention_forward(out, lse, qkv, c.n_head);
    ADD_FAILURE() << "cuDNN attention on f32 tensors did not fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ternion::test
