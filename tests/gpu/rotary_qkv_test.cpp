// Rotary position embedding with grouped-query packing on the GPU against the CPU op, forward and
// backward, r = 1, 2 and 4, head sizes 64 and 6, first positions 0 and in the thousands (angles
// where only an accurate sincosf agrees), F32 and BF16; the backward's key and value sums are
// deterministic (two runs give the same bits).
#include "gpu_test_util.h"
#include "kernels/rotary_qkv.h"

namespace ternion::test {
namespace {

struct Case {
  std::int64_t batch, seq, kv_heads, queries_per_kv, head_size, first_position;
};

const Case kCases[] = {
    {2, 33, 4, 1, 64, 0},  {2, 17, 2, 2, 64, 4000}, {1, 40, 2, 4, 64, 7},
    {3, 11, 3, 1, 6, 123}, {2, 9, 2, 2, 6, 0},      {2, 13, 1, 4, 6, 2049},
};
constexpr double kTheta = 10000.0;

void check(DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  // F32: the same f32 angles on both devices, cos and sin within an ulp or two. BF16: an ulp
  // of bf16 where the f32 results round differently.
  const double atol = bf16 ? 1e-3 : 1e-5, rtol = bf16 ? 8e-3 : 1e-5;
  std::uint64_t seed = 70;
  for (const Case& c : kCases) {
    const std::int64_t r = c.queries_per_kv, hs = c.head_size;
    SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + ", r " + std::to_string(r) + ", G " +
                 std::to_string(c.kv_heads) + ", hs " + std::to_string(hs) +
                 ", first_position " + std::to_string(c.first_position));
    const Shape in_shape = {c.batch, c.seq, c.kv_heads * (r + 2) * hs};
    const Shape out_shape = {c.batch, c.seq, c.kv_heads * r * 3 * hs};
    Tensor grouped = random_tensor(in_shape, seed++), dpacked = random_tensor(out_shape, seed++);
    if (bf16) {
      grouped = round_to_bf16(grouped);
      dpacked = round_to_bf16(dpacked);
    }

    // The reference: the CPU op in the same dtype (bf16 staged through f32, rounded once).
    Tensor want_packed = Tensor::empty(out_shape, dtype);
    Tensor want_dgrouped = Tensor::empty(in_shape, dtype);
    Tensor cpu_grouped = Tensor::empty(in_shape, dtype);
    Tensor cpu_dpacked = Tensor::empty(out_shape, dtype);
    convert(cpu_grouped, grouped);
    convert(cpu_dpacked, dpacked);
    rotary_qkv_forward(want_packed, cpu_grouped, c.kv_heads, r, c.first_position, kTheta);
    rotary_qkv_backward(want_dgrouped, cpu_dpacked, c.kv_heads, r, c.first_position, kTheta);

    Tensor packed = to_gpu(Tensor::full(out_shape, NAN), dtype);  // every element must be written
    rotary_qkv_forward(packed, to_gpu(grouped, dtype), c.kv_heads, r, c.first_position, kTheta);
    expect_close("rotary_qkv packed vs cpu", to_host_floats(packed),
                 as_f32(want_packed).to_vector(), atol, rtol);

    const Tensor gdpacked = to_gpu(dpacked, dtype);
    Tensor dgrouped = to_gpu(Tensor::full(in_shape, NAN), dtype);
    Tensor dgrouped_again = to_gpu(Tensor::full(in_shape, NAN), dtype);
    rotary_qkv_backward(dgrouped, gdpacked, c.kv_heads, r, c.first_position, kTheta);
    rotary_qkv_backward(dgrouped_again, gdpacked, c.kv_heads, r, c.first_position, kTheta);
    const std::vector<float> got = to_host_floats(dgrouped);
    expect_bitwise_equal("rotary_qkv dgrouped, two runs", to_host_floats(dgrouped_again), got);
    expect_close("rotary_qkv dgrouped vs cpu", got, as_f32(want_dgrouped).to_vector(), atol,
                 rtol);
  }
}

TEST(GpuRotaryQkv, F32MatchesCpu) {
  TN_REQUIRE_GPU();
  check(DType::F32);
}

TEST(GpuRotaryQkv, Bf16MatchesCpu) {
  TN_REQUIRE_GPU();
  check(DType::BF16);
}

TEST(GpuRotaryQkv, RefusesHeadsBeyondTheArgumentTable) {
  TN_REQUIRE_GPU();
  // One group, r = 1, head size 514: one pair more than the kernel's table holds.
  Tensor grouped = to_gpu(Tensor::zeros({1, 2, 3 * 514}));
  Tensor packed = to_gpu(Tensor::zeros({1, 2, 3 * 514}));
  EXPECT_THROW(rotary_qkv_forward(packed, grouped, 1, 1, 0, kTheta), InternalError);
  Tensor ok_grouped = to_gpu(Tensor::zeros({1, 2, 3 * 512}));
  Tensor ok_packed = to_gpu(Tensor::zeros({1, 2, 3 * 512}));
  EXPECT_NO_THROW(rotary_qkv_forward(ok_packed, ok_grouped, 1, 1, 0, kTheta));
}

}  // namespace
}  // namespace ternion::test
