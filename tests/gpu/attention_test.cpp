// CUDA causal attention against the CPU op on random qkv: out and probs forward, dqkv backward.
// Shapes: a row shorter than a warp (T = 17, odd head count) and rows that take each lane
// twice (T = 64). F32 is tight; BF16 gets the CPU op on the same bf16-rounded inputs, with
// tolerances from bf16's rounding (probs and dscores are rounded before the GEMMs that use
// them). Outputs start as NaN, so an element the op leaves unwritten fails.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "gpu_test_util.h"
#include "kernels/attention.h"

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
  Tolerance out, probs, dqkv;
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

void check_against_cpu(const AttentionCase& c, DType dtype, std::uint64_t seed,
                       const Tolerances& tol) {
  const std::string name = c.label(dtype);
  const std::int64_t channels = static_cast<std::int64_t>(c.n_head) * c.head_size;
  const Shape qkv_shape{c.batch, c.seq, 3 * channels}, out_shape{c.batch, c.seq, channels};
  const Shape probs_shape{c.batch, c.n_head, c.seq, c.seq};

  Tensor qkv = random_tensor(qkv_shape, seed, -2.0f, 2.0f);
  Tensor dout = random_tensor(out_shape, seed + 1);
  if (dtype == DType::BF16) {
    qkv = round_to_bf16(qkv);
    dout = round_to_bf16(dout);
  }

  // The CPU op (F32) on exactly the values the GPU op sees.
  Tensor want_out = Tensor::empty(out_shape), want_probs = Tensor::empty(probs_shape);
  attention_forward(want_out, want_probs, qkv, c.n_head);
  Tensor want_dqkv = Tensor::empty(qkv_shape);
  attention_backward(want_dqkv, dout, qkv, want_probs, c.n_head);

  const Tensor qkv_gpu = to_gpu(qkv, dtype), dout_gpu = to_gpu(dout, dtype);
  Tensor out = nan_tensor(out_shape, dtype), probs = nan_tensor(probs_shape, dtype);
  attention_forward(out, probs, qkv_gpu, c.n_head);
  Tensor dqkv = nan_tensor(qkv_shape, dtype);
  attention_backward(dqkv, dout_gpu, qkv_gpu, probs, c.n_head);

  const std::vector<float> got_probs = to_host_floats(probs);
  expect_matches(name + " out", to_host_floats(out), want_out.to_vector(), tol.out,
                 tol.atol_scales_with_max);
  expect_matches(name + " probs", got_probs, want_probs.to_vector(), tol.probs,
                 tol.atol_scales_with_max);
  expect_matches(name + " dqkv", to_host_floats(dqkv), want_dqkv.to_vector(), tol.dqkv,
                 tol.atol_scales_with_max);

  // Masked entries are exactly 0, as on the CPU.
  std::vector<float> above_diagonal;
  for (std::size_t row = 0; row < got_probs.size() / c.seq; ++row)
    for (int j = static_cast<int>(row % c.seq) + 1; j < c.seq; ++j)
      above_diagonal.push_back(got_probs[row * c.seq + j]);
  expect_bitwise_equal(name + " probs above the diagonal", above_diagonal,
                       std::vector<float>(above_diagonal.size(), 0.0f));
}

const AttentionCase kSmall{2, 17, 3, 8};
const AttentionCase kLarger{2, 64, 4, 16};

TEST(GpuAttention, F32MatchesCpu) {
  TN_REQUIRE_GPU();
  // Different summation orders (cuBLAS, warp reductions) only.
  const Tolerances tol{{1e-6, 1e-5}, {1e-7, 1e-5}, {1e-5, 1e-5}, false};
  check_against_cpu(kSmall, DType::F32, 31, tol);
  check_against_cpu(kLarger, DType::F32, 41, tol);
}

TEST(GpuAttention, Bf16MatchesCpuToItsRounding) {
  TN_REQUIRE_GPU();
  // bf16 keeps 8 significant bits (relative rounding error <= 2^-9 ~ 2e-3): probs are rounded
  // once; out and dqkv come from rounded operands (probs, dscores) and are rounded again.
  const Tolerances tol{{5e-3, 1e-2}, {1e-4, 8e-3}, {5e-3, 1e-2}, true};
  check_against_cpu(kSmall, DType::BF16, 51, tol);
  check_against_cpu(kLarger, DType::BF16, 61, tol);
}

}  // namespace
}  // namespace ternion::test
