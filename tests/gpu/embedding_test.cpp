// Token and position embeddings on the GPU against the CPU op: the forward copies rows exactly
// (zeros outside the vocabulary shard), the backward with many repeated tokens is deterministic
// (two runs give the same bits) and equals the CPU's sums (a run longer than one segment sums
// in another order), on a shard with vocab_start > 0 too,
// with F32 and BF16 tables / gradients of the output.
#include "gpu_test_util.h"
#include "kernels/embedding.h"

namespace ternion::test {
namespace {

constexpr std::int64_t kB = 4, kT = 64, kC = 200, kV = 50, kTMax = 80;

// B*T = 256 tokens over 50 ids, so most ids repeat; plus ids outside every table.
Tensor make_tokens() {
  std::vector<std::int32_t> t = random_ints(kB * kT, 51, 0, static_cast<std::int32_t>(kV));
  t[3] = -3;
  t[100] = static_cast<std::int32_t>(kV) + 7;
  // A hot id, in both shards: a run of 140 sorted entries over three 64-entry segments.
  for (int i = 104; i < 244; ++i) t[i] = 22;
  return i32_tensor(t, {kB, kT});
}

struct Shard {
  std::int64_t vocab_start, rows;
};
const Shard kShards[] = {{0, kV}, {20, 25}};  // the whole table, and rows [20, 45)

void check_token_embedding(DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  const Tensor tokens = make_tokens(), gtokens = to_gpu(tokens, DType::I32);
  for (const auto& [vocab_start, rows] : kShards) {
    SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + ", vocab_start " +
                 std::to_string(vocab_start));
    Tensor wte = random_tensor({rows, kC}, 52);
    Tensor dout = random_tensor({kB, kT, kC}, 53);
    if (bf16) {
      wte = round_to_bf16(wte);
      dout = round_to_bf16(dout);
    }
    const Tensor dwte0 = random_tensor({rows, kC}, 54);

    Tensor want_out = Tensor::empty({kB, kT, kC});
    token_embedding_forward(want_out, tokens, wte, vocab_start);
    Tensor out = Tensor::full({kB, kT, kC}, NAN);  // every element must be written
    out = to_gpu(out, dtype);
    token_embedding_forward(out, gtokens, to_gpu(wte, dtype), vocab_start);
    expect_bitwise_equal("token embedding forward", to_host_floats(out), want_out.to_vector());

    Tensor want_dwte = dwte0.clone();
    token_embedding_backward(want_dwte, dout, tokens, vocab_start);
    const Tensor gdout = to_gpu(dout, dtype);
    Tensor dwte = to_gpu(dwte0), dwte_again = to_gpu(dwte0);
    token_embedding_backward(dwte, gdout, gtokens, vocab_start);
    token_embedding_backward(dwte_again, gdout, gtokens, vocab_start);
    const std::vector<float> got = to_host_floats(dwte);
    expect_bitwise_equal("token embedding dwte, two runs", to_host_floats(dwte_again), got);
    expect_close("token embedding dwte vs cpu (accumulated)", got, want_dwte.to_vector(), 1e-5,
                 1e-5);
  }
}

TEST(GpuEmbedding, TokenF32MatchesCpu) {
  TN_REQUIRE_GPU();
  check_token_embedding(DType::F32);
}

TEST(GpuEmbedding, TokenBf16MatchesCpu) {
  TN_REQUIRE_GPU();
  check_token_embedding(DType::BF16);
}

void check_position_embedding(DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  SCOPED_TRACE(bf16 ? "bf16" : "f32");
  Tensor wpe = random_tensor({kTMax, kC}, 61), x = random_tensor({kB, kT, kC}, 62);
  Tensor dout = random_tensor({kB, kT, kC}, 63);
  if (bf16) {
    wpe = round_to_bf16(wpe);
    x = round_to_bf16(x);
    dout = round_to_bf16(dout);
  }
  const Tensor dwpe0 = random_tensor({kTMax, kC}, 64);

  // The reference: the CPU op on the same dtype (bf16 staged: the sum rounded once).
  Tensor want_out = Tensor::empty({kB, kT, kC}, dtype), cpu_wpe = Tensor::empty({kTMax, kC}, dtype);
  convert(want_out, x);
  convert(cpu_wpe, wpe);
  position_embedding_forward(want_out, cpu_wpe);
  Tensor out = to_gpu(x, dtype);
  position_embedding_forward(out, to_gpu(wpe, dtype));
  expect_bitwise_equal("position embedding forward", to_host_floats(out),
                       as_f32(want_out).to_vector());

  Tensor want_dwpe = dwpe0.clone();
  position_embedding_backward(want_dwpe, dout);
  Tensor dwpe = to_gpu(dwpe0), dwpe_again = to_gpu(dwpe0);
  const Tensor gdout = to_gpu(dout, dtype);
  position_embedding_backward(dwpe, gdout);
  position_embedding_backward(dwpe_again, gdout);
  const std::vector<float> got = to_host_floats(dwpe);
  expect_bitwise_equal("position embedding dwpe, two runs", to_host_floats(dwpe_again), got);
  expect_close("position embedding dwpe vs cpu (accumulated)", got, want_dwpe.to_vector(), 1e-6,
               1e-6);
}

TEST(GpuEmbedding, PositionF32MatchesCpu) {
  TN_REQUIRE_GPU();
  check_position_embedding(DType::F32);
}

TEST(GpuEmbedding, PositionBf16MatchesCpu) {
  TN_REQUIRE_GPU();
  check_position_embedding(DType::BF16);
}

}  // namespace
}  // namespace ternion::test
