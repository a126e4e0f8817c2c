// Cross-entropy on the GPU against the CPU op: forward (also over GPT-2's vocabulary, where
// each thread's online softmax sees ~100 columns), backward (in place too), ignored rows
// and padding columns exactly zero, the vocab-parallel pieces on two shards (the second with
// vocab_start > 0 and padding) combined by hand equal to the whole op, the fused
// forward_backward equal to the two kernels, F32 and BF16 logits.
#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu_test_util.h"
#include "kernels/cross_entropy.h"

namespace ternion::test {
namespace {

constexpr std::int64_t kRows = 37, kPadded = 1031, kVocab = 1000;
constexpr std::int64_t kSplit = 520;  // shards: global columns [0, 520) and [520, 1031)
constexpr float kDloss = 1.0f / 29.0f;

// Targets in [0, kVocab), a few ignored, one in each shard's edge column.
Tensor make_targets() {
  std::vector<std::int32_t> t = random_ints(kRows, 21, 0, static_cast<std::int32_t>(kVocab));
  t[2] = kIgnoreIndex;
  t[9] = kIgnoreIndex;
  t[30] = kIgnoreIndex;
  t[4] = 0;
  t[5] = static_cast<std::int32_t>(kSplit - 1);
  t[6] = static_cast<std::int32_t>(kSplit);
  t[7] = static_cast<std::int32_t>(kVocab - 1);
  return i32_tensor(t, {kRows});
}

Tensor gpu_rows_of(std::int64_t rows) { return Tensor::empty({rows}, DType::F32, gpu()); }
Tensor gpu_rows() { return gpu_rows_of(kRows); }

// Row r's values [r * cols, (r + 1) * cols) of a host vector.
bool row_is_zero(const std::vector<float>& values, std::int64_t row, std::int64_t cols) {
  return std::all_of(values.begin() + row * cols, values.begin() + (row + 1) * cols,
                     [](float v) { return v == 0.0f; });
}

void check_against_cpu(DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  SCOPED_TRACE(bf16 ? "bf16" : "f32");
  Tensor logits = random_tensor({kRows, kPadded}, 20, -6.0f, 6.0f);
  if (bf16) logits = round_to_bf16(logits);
  const Tensor targets = make_targets();
  const std::vector<std::int32_t> target_values = [&] {
    std::vector<std::int32_t> v(kRows);
    std::copy_n(targets.data<std::int32_t>(), kRows, v.begin());
    return v;
  }();

  // CPU reference, F32 on the (rounded) logits.
  Tensor want_losses = Tensor::empty({kRows}), want_lse = Tensor::empty({kRows});
  cross_entropy_forward(want_losses, want_lse, logits, targets, kVocab);
  Tensor want_dlogits = Tensor::empty({kRows, kPadded});
  cross_entropy_backward(want_dlogits, logits, want_lse, targets, kDloss, kVocab);

  const Tensor glogits = to_gpu(logits, dtype), gtargets = to_gpu(targets, DType::I32);
  Tensor losses = gpu_rows(), lse = gpu_rows();
  cross_entropy_forward(losses, lse, glogits, gtargets, kVocab);
  const std::vector<float> got_losses = to_host_floats(losses);
  expect_close("cross_entropy losses", got_losses, want_losses.to_vector(), 1e-5, 1e-5);
  expect_close("cross_entropy lse", to_host_floats(lse), want_lse.to_vector(), 1e-5, 1e-6);
  for (std::int64_t r = 0; r < kRows; ++r) {
    if (target_values[r] == kIgnoreIndex) {
      EXPECT_EQ(got_losses[r], 0.0f) << "ignored row " << r;
    }
  }

  // Backward from the CPU's lse, so only the exponentials differ.
  const Tensor glse = to_gpu(want_lse);
  Tensor dlogits = Tensor::empty({kRows, kPadded}, dtype, gpu());
  cross_entropy_backward(dlogits, glogits, glse, gtargets, kDloss, kVocab);
  const std::vector<float> got_dlogits = to_host_floats(dlogits);
  // F32: exp to a few ulps; BF16: the gradient rounded to bf16 (8 bits) once.
  expect_close("cross_entropy dlogits", got_dlogits, want_dlogits.to_vector(), 1e-9,
               bf16 ? 1e-2 : 1e-5);
  for (std::int64_t r = 0; r < kRows; ++r) {
    if (target_values[r] == kIgnoreIndex) {
      EXPECT_TRUE(row_is_zero(got_dlogits, r, kPadded)) << "ignored row " << r;
    }
    for (std::int64_t v = kVocab; v < kPadded; ++v)
      ASSERT_EQ(got_dlogits[r * kPadded + v], 0.0f) << "padding column " << v << " of row " << r;
  }

  // In place: dlogits over the logits.
  Tensor in_place = to_gpu(logits, dtype);
  cross_entropy_backward(in_place, in_place, glse, gtargets, kDloss, kVocab);
  expect_bitwise_equal("cross_entropy dlogits in place", to_host_floats(in_place), got_dlogits);
}

TEST(GpuCrossEntropy, F32MatchesCpu) {
  TN_REQUIRE_GPU();
  check_against_cpu(DType::F32);
}

TEST(GpuCrossEntropy, Bf16LogitsMatchCpuToBf16Rounding) {
  TN_REQUIRE_GPU();
  check_against_cpu(DType::BF16);
}

// The pieces on two shards, reduced on the host as the collectives would, give the whole op;
// each piece also matches the CPU's on the same shard; the shard backward is the column slice
// of the whole backward.
void check_vocab_parallel(DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  SCOPED_TRACE(bf16 ? "bf16" : "f32");
  Tensor logits = random_tensor({kRows, kPadded}, 30, -6.0f, 6.0f);
  if (bf16) logits = round_to_bf16(logits);
  const Tensor targets = make_targets(), gtargets = to_gpu(targets, DType::I32);
  const std::int64_t starts[2] = {0, kSplit};
  const std::int64_t widths[2] = {kSplit, kPadded - kSplit};
  Tensor cpu_shards[2], gpu_shards[2];
  for (int s = 0; s < 2; ++s) {
    cpu_shards[s] = logits.slice(1, starts[s], widths[s]).contiguous();
    gpu_shards[s] = to_gpu(cpu_shards[s], dtype);
  }

  // row_max, then the all-reduce max.
  std::vector<float> global_max(kRows, -std::numeric_limits<float>::infinity());
  for (int s = 0; s < 2; ++s) {
    Tensor row_max = gpu_rows(), want = Tensor::empty({kRows});
    cross_entropy_row_max(row_max, gpu_shards[s], starts[s], kVocab);
    cross_entropy_row_max(want, cpu_shards[s], starts[s], kVocab);
    const std::vector<float> got = to_host_floats(row_max);
    expect_bitwise_equal("row_max of shard " + std::to_string(s), got, want.to_vector());
    for (std::int64_t r = 0; r < kRows; ++r) global_max[r] = std::max(global_max[r], got[r]);
  }
  const Tensor global_max_cpu = Tensor::from_vector(global_max, {kRows});
  const Tensor ggmax = to_gpu(global_max_cpu);

  // row_sum_exp and target_logit, then the all-reduce sums.
  std::vector<float> sum_exp(kRows, 0.0f), target_logit(kRows, 0.0f);
  for (int s = 0; s < 2; ++s) {
    Tensor piece = gpu_rows(), want = Tensor::empty({kRows});
    cross_entropy_row_sum_exp(piece, gpu_shards[s], ggmax, starts[s], kVocab);
    cross_entropy_row_sum_exp(want, cpu_shards[s], global_max_cpu, starts[s], kVocab);
    const std::vector<float> got_sum = to_host_floats(piece);
    expect_close("row_sum_exp of shard " + std::to_string(s), got_sum, want.to_vector(), 1e-6,
                 1e-5);
    Tensor tl = gpu_rows(), want_tl = Tensor::empty({kRows});
    cross_entropy_target_logit(tl, gpu_shards[s], gtargets, starts[s], kVocab);
    cross_entropy_target_logit(want_tl, cpu_shards[s], targets, starts[s], kVocab);
    const std::vector<float> got_tl = to_host_floats(tl);
    expect_bitwise_equal("target_logit of shard " + std::to_string(s), got_tl,
                         want_tl.to_vector());
    for (std::int64_t r = 0; r < kRows; ++r) {
      sum_exp[r] += got_sum[r];
      target_logit[r] += got_tl[r];
    }
  }

  Tensor losses = gpu_rows(), lse = gpu_rows();
  cross_entropy_finish(losses, lse, ggmax, to_gpu(Tensor::from_vector(sum_exp, {kRows})),
                       to_gpu(Tensor::from_vector(target_logit, {kRows})), gtargets);
  Tensor whole_losses = gpu_rows(), whole_lse = gpu_rows();
  const Tensor gwhole = to_gpu(logits, dtype);
  cross_entropy_forward(whole_losses, whole_lse, gwhole, gtargets, kVocab);
  expect_close("sharded losses vs whole", to_host_floats(losses), to_host_floats(whole_losses),
               1e-5, 1e-5);
  expect_close("sharded lse vs whole", to_host_floats(lse), to_host_floats(whole_lse), 1e-5,
               1e-6);

  // The shard backward (vocab_start 520, with padding) is the slice of the whole backward.
  Tensor whole_dlogits = Tensor::empty({kRows, kPadded}, dtype, gpu());
  cross_entropy_backward(whole_dlogits, gwhole, whole_lse, gtargets, kDloss, kVocab);
  const Tensor whole_slice = whole_dlogits.slice(1, kSplit, kPadded - kSplit).contiguous();
  Tensor shard_dlogits = Tensor::empty({kRows, kPadded - kSplit}, dtype, gpu());
  cross_entropy_backward(shard_dlogits, gpu_shards[1], whole_lse, gtargets, kDloss, kVocab,
                         kIgnoreIndex, kSplit);
  expect_bitwise_equal("shard backward vs slice of whole backward", to_host_floats(shard_dlogits),
                       to_host_floats(whole_slice));
  // And the CPU's shard backward.
  Tensor cpu_lse = Tensor::empty({kRows});
  cpu_lse.copy_from(whole_lse);
  Tensor want_shard = Tensor::empty({kRows, kPadded - kSplit});
  cross_entropy_backward(want_shard, cpu_shards[1], cpu_lse, targets, kDloss, kVocab,
                         kIgnoreIndex, kSplit);
  expect_close("shard backward vs cpu", to_host_floats(shard_dlogits), want_shard.to_vector(),
               1e-9, bf16 ? 1e-2 : 1e-5);
}

// GPT-2's vocabulary: ~100 columns per thread, so the forward's online max and sum of
// exponentials really runs, 8 columns at a time (50304 padded columns) as the backward does.
// Rows in the order that rescales at every column (increasing), that never rescales
// (decreasing), one spike, all equal, and an ignored random one, in F32 and BF16; the
// backward also in place.
TEST(GpuCrossEntropy, GptVocabularyRowsMatchCpu) {
  TN_REQUIRE_GPU();
  constexpr std::int64_t kGptVocab = 50257, kGptPadded = 50304, kGptRows = 5;
  std::vector<float> values = random_floats(kGptRows * kGptPadded, 31, -20.0f, 20.0f);
  for (std::int64_t v = 0; v < kGptPadded; ++v) {
    const float ramp = -20.0f + 40.0f * static_cast<float>(v) / kGptPadded;
    values[0 * kGptPadded + v] = ramp;
    values[1 * kGptPadded + v] = -ramp;
    values[2 * kGptPadded + v] = v == 31337 ? 30.0f : 0.5f;
    values[3 * kGptPadded + v] = 1.25f;
  }
  const Tensor targets = i32_tensor({5, 50000, 31337, 0, kIgnoreIndex}, {kGptRows});
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor logits = Tensor::from_vector(values, {kGptRows, kGptPadded});
    if (dtype == DType::BF16) logits = round_to_bf16(logits);
    Tensor want_losses = Tensor::empty({kGptRows}), want_lse = Tensor::empty({kGptRows});
    cross_entropy_forward(want_losses, want_lse, logits, targets, kGptVocab);
    Tensor losses = Tensor::empty({kGptRows}, DType::F32, gpu());
    Tensor lse = Tensor::empty({kGptRows}, DType::F32, gpu());
    cross_entropy_forward(losses, lse, to_gpu(logits, dtype), to_gpu(targets, DType::I32),
                          kGptVocab);
    expect_close("gpt-vocabulary losses", to_host_floats(losses), want_losses.to_vector(), 1e-5,
                 1e-5);
    expect_close("gpt-vocabulary lse", to_host_floats(lse), want_lse.to_vector(), 1e-5, 1e-6);
    // The backward over the padded rows (8 columns at a time), from the CPU's lse.
    Tensor want_dlogits = Tensor::empty({kGptRows, kGptPadded});
    cross_entropy_backward(want_dlogits, logits, want_lse, targets, kDloss, kGptVocab);
    Tensor dlogits = Tensor::empty({kGptRows, kGptPadded}, dtype, gpu());
    cross_entropy_backward(dlogits, to_gpu(logits, dtype), to_gpu(want_lse),
                           to_gpu(targets, DType::I32), kDloss, kGptVocab);
    const std::vector<float> got_dlogits = to_host_floats(dlogits);
    expect_close("gpt-vocabulary dlogits", got_dlogits, want_dlogits.to_vector(), 1e-9,
                 dtype == DType::BF16 ? 1e-2 : 1e-5);
    EXPECT_TRUE(row_is_zero(got_dlogits, kGptRows - 1, kGptPadded)) << "the ignored row";
    for (std::int64_t v = kGptVocab; v < kGptPadded; ++v)
      ASSERT_EQ(got_dlogits[v], 0.0f) << "padding column " << v;
    // In place over the logits: the same bits.
    Tensor in_place = to_gpu(logits, dtype);
    cross_entropy_backward(in_place, in_place, to_gpu(want_lse), to_gpu(targets, DType::I32),
                           kDloss, kGptVocab);
    expect_bitwise_equal("gpt-vocabulary dlogits in place", to_host_floats(in_place),
                         got_dlogits);
  }
}

// The fused forward and backward against the two kernels on the GPU, bit for bit: over GPT-2's
// vocabulary (the vector path, 50304 columns), over an odd width (one column at a time), with
// ignored rows and a target outside the vocabulary (NaN row), in place and into a separate
// dlogits, F32 and BF16.
TEST(GpuCrossEntropy, ForwardBackwardIsTheTwoKernelsBitForBit) {
  TN_REQUIRE_GPU();
  struct Shape2 {
    std::int64_t rows, padded, vocab;
  };
  for (const Shape2 shape : {Shape2{6, 50304, 50257}, Shape2{kRows, kPadded, kVocab}}) {
    std::vector<std::int32_t> t = random_ints(shape.rows, 51, 0,
                                              static_cast<std::int32_t>(shape.vocab));
    t[1] = kIgnoreIndex;
    t[3] = static_cast<std::int32_t>(shape.vocab);  // outside the vocabulary: a NaN row
    const Tensor targets = to_gpu(i32_tensor(t, {shape.rows}), DType::I32);
    for (DType dtype : {DType::F32, DType::BF16}) {
      const std::string label = std::string(dtype_name(dtype)) + " [" +
                                std::to_string(shape.rows) + "x" + std::to_string(shape.padded) +
                                "]";
      const Tensor logits =
          to_gpu(random_tensor({shape.rows, shape.padded}, 52, -8.0f, 8.0f), dtype);
      Tensor want_losses = gpu_rows_of(shape.rows), want_lse = gpu_rows_of(shape.rows);
      cross_entropy_forward(want_losses, want_lse, logits, targets, shape.vocab);
      Tensor want = Tensor::empty(logits.shape(), dtype, gpu());
      cross_entropy_backward(want, logits, want_lse, targets, kDloss, shape.vocab);

      Tensor losses = gpu_rows_of(shape.rows), lse = gpu_rows_of(shape.rows);
      Tensor dlogits = Tensor::empty(logits.shape(), dtype, gpu());
      cross_entropy_forward_backward(losses, lse, dlogits, logits, targets, kDloss, shape.vocab);
      expect_bitwise_equal(label + " losses", to_host_floats(losses), to_host_floats(want_losses));
      expect_bitwise_equal(label + " lse", to_host_floats(lse), to_host_floats(want_lse));
      expect_bitwise_equal(label + " dlogits", to_host_floats(dlogits), to_host_floats(want));
      Tensor in_place = logits.clone();
      Tensor losses2 = gpu_rows_of(shape.rows), lse2 = gpu_rows_of(shape.rows);
      cross_entropy_forward_backward(losses2, lse2, in_place, in_place, targets, kDloss,
                                     shape.vocab);
      expect_bitwise_equal(label + " losses in place", to_host_floats(losses2),
                           to_host_floats(want_losses));
      expect_bitwise_equal(label + " dlogits in place", to_host_floats(in_place),
                           to_host_floats(want));
      const std::vector<float> got_losses = to_host_floats(losses);
      EXPECT_EQ(got_losses[1], 0.0f) << label << ": the ignored row";
      EXPECT_TRUE(std::isnan(got_losses[3])) << label << ": the target outside the vocabulary";
    }
  }
}

// A NaN logit makes its row's loss and lse NaN wherever it sits, also when the thread that
// reads it sees nothing else and meets an empty thread in the reduction; -inf logits add
// nothing. Vocabulary 100, fewer columns than the 512 threads:
//  - rows of 100 columns take one column per thread: column 96's thread merges with column
//    112's, which has none;
//  - rows of 104 take 8 per thread up to column 96, then one (threads 0-3 take the tail
//    96-99): thread 5 reads columns 40-47 alone, and merges with the empty thread 21.
TEST(GpuCrossEntropy, NanLogitPoisonsItsRowAndMinusInfinityAddsNothing) {
  TN_REQUIRE_GPU();
  constexpr std::int64_t kSmallVocab = 100, kSmallRows = 4;
  for (const std::int64_t padded : {std::int64_t{100}, std::int64_t{104}}) {
    SCOPED_TRACE("padded " + std::to_string(padded));
    std::vector<float> values = random_floats(kSmallRows * padded, 41, -3.0f, 3.0f);
    if (padded == 100) {
      values[0 * padded + 96] = NAN;
    } else {
      for (std::int64_t v = 40; v < 48; ++v) values[0 * padded + v] = v == 43 ? NAN : -INFINITY;
    }
    values[1 * padded + 5] = NAN;
    for (std::int64_t v : {0, 33, 96, 99}) values[3 * padded + v] = -INFINITY;
    const Tensor logits = Tensor::from_vector(values, {kSmallRows, padded});
    const Tensor targets = i32_tensor({1, 2, 3, 4}, {kSmallRows});
    Tensor want_losses = Tensor::empty({kSmallRows}), want_lse = Tensor::empty({kSmallRows});
    cross_entropy_forward(want_losses, want_lse, logits, targets, kSmallVocab);
    Tensor losses = gpu_rows_of(kSmallRows), lse = gpu_rows_of(kSmallRows);
    cross_entropy_forward(losses, lse, to_gpu(logits), to_gpu(targets, DType::I32), kSmallVocab);
    const std::vector<float> got_losses = to_host_floats(losses), got_lse = to_host_floats(lse);
    for (int r : {0, 1}) {
      EXPECT_TRUE(std::isnan(got_losses[r])) << "row " << r << " loss " << got_losses[r];
      EXPECT_TRUE(std::isnan(got_lse[r])) << "row " << r << " lse " << got_lse[r];
    }
    const std::vector<float> want = want_losses.to_vector(), want_lses = want_lse.to_vector();
    for (int r : {2, 3}) {
      EXPECT_NEAR(got_losses[r], want[r], 1e-5 * std::abs(want[r]) + 1e-5) << "row " << r;
      EXPECT_NEAR(got_lse[r], want_lses[r], 1e-5 * std::abs(want_lses[r]) + 1e-6) << "row " << r;
    }
  }
}

TEST(GpuCrossEntropy, VocabParallelPiecesEqualTheWholeOp) {
  TN_REQUIRE_GPU();
  check_vocab_parallel(DType::F32);
}

TEST(GpuCrossEntropy, VocabParallelPiecesOnBf16Logits) {
  TN_REQUIRE_GPU();
  check_vocab_parallel(DType::BF16);
}

// A shard holding padding only: max -inf, sum 0, gradient 0, as the CPU.
TEST(GpuCrossEntropy, PaddingOnlyShard) {
  TN_REQUIRE_GPU();
  const Tensor shard = random_tensor({kRows, 31}, 40);
  const Tensor gshard = to_gpu(shard), gtargets = to_gpu(make_targets(), DType::I32);
  Tensor row_max = gpu_rows(), sum_exp = gpu_rows();
  cross_entropy_row_max(row_max, gshard, kVocab, kVocab);
  EXPECT_EQ(to_host_floats(row_max),
            std::vector<float>(kRows, -std::numeric_limits<float>::infinity()));
  cross_entropy_row_sum_exp(sum_exp, gshard, to_gpu(Tensor::zeros({kRows})), kVocab, kVocab);
  EXPECT_EQ(to_host_floats(sum_exp), std::vector<float>(kRows, 0.0f));
  Tensor dlogits = Tensor::empty({kRows, 31}, DType::F32, gpu());
  cross_entropy_backward(dlogits, gshard, to_gpu(Tensor::zeros({kRows})), gtargets, kDloss,
                         kVocab, kIgnoreIndex, kVocab);
  EXPECT_EQ(to_host_floats(dlogits), std::vector<float>(kRows * 31, 0.0f));
}

}  // namespace
}  // namespace ternion::test
