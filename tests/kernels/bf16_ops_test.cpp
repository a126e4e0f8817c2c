// BF16 tensors on the CPU ops that take them (layer_norm, cross-entropy, embeddings, dropout):
// the staging (kernels/convert.h) must give exactly the F32 op on the bf16-rounded inputs,
// with the outputs rounded to bf16 once, and leave F32 outputs (statistics, losses, parameter
// gradients) in F32. Every comparison is bit for bit.
#include <gtest/gtest.h>
#include "bf16_test_util.h"

#include <cstdint>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/layer_norm.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

using test::random_f32;
using test::rounded;
using test::to_bf16;

// The f32 values of a bf16 tensor, or of an f32 tensor rounded to bf16.
std::vector<float> bf16_values(const Tensor& t) {
  return as_f32(t.dtype() == DType::BF16 ? t : to_bf16(t)).to_vector();
}


TEST(Bf16Ops, LayerNormIsTheF32OpOnRoundedInputs) {
  constexpr int kRows = 6, kCols = 40;
  const Tensor x = random_f32({kRows, kCols}, 1, -2.0f, 3.0f);
  const Tensor weight = random_f32({kCols}, 2, 0.5f, 1.5f), bias = random_f32({kCols}, 3);
  const Tensor dout = random_f32({kRows, kCols}, 4);

  // The reference: f32 on the rounded values.
  Tensor want_out = Tensor::empty({kRows, kCols}), want_mean = Tensor::empty({kRows}),
         want_rstd = Tensor::empty({kRows});
  layer_norm_forward(want_out, want_mean, want_rstd, rounded(x), rounded(weight), rounded(bias));
  Tensor want_dx = Tensor::empty({kRows, kCols});
  Tensor want_dweight = Tensor::full({kCols}, 0.25f), want_dbias = Tensor::full({kCols}, -0.5f);
  layer_norm_backward(want_dx, want_dweight, want_dbias, rounded(dout), rounded(x),
                      rounded(weight), want_mean, want_rstd);

  Tensor out = Tensor::empty({kRows, kCols}, DType::BF16), mean = Tensor::empty({kRows}),
         rstd = Tensor::empty({kRows});
  layer_norm_forward(out, mean, rstd, to_bf16(x), to_bf16(weight), to_bf16(bias));
  test::expect_bitwise_equal("bf16 layer_norm out", bf16_values(out), bf16_values(want_out));
  test::expect_bitwise_equal("bf16 layer_norm mean (f32)", mean.to_vector(),
                             want_mean.to_vector());
  test::expect_bitwise_equal("bf16 layer_norm rstd (f32)", rstd.to_vector(),
                             want_rstd.to_vector());

  Tensor dx = Tensor::empty({kRows, kCols}, DType::BF16);
  Tensor dweight = Tensor::full({kCols}, 0.25f), dbias = Tensor::full({kCols}, -0.5f);
  layer_norm_backward(dx, dweight, dbias, to_bf16(dout), to_bf16(x), to_bf16(weight), mean, rstd);
  test::expect_bitwise_equal("bf16 layer_norm dx", bf16_values(dx), bf16_values(want_dx));
  test::expect_bitwise_equal("bf16 layer_norm dweight (f32, accumulated)", dweight.to_vector(),
                             want_dweight.to_vector());
  test::expect_bitwise_equal("bf16 layer_norm dbias (f32, accumulated)", dbias.to_vector(),
                             want_dbias.to_vector());

  // In place (dx aliasing dout) gives the same dx.
  Tensor dout_in_place = to_bf16(dout);
  Tensor dw2 = Tensor::zeros({kCols}), db2 = Tensor::zeros({kCols});
  layer_norm_backward(dout_in_place, dw2, db2, dout_in_place, to_bf16(x), to_bf16(weight), mean,
                      rstd);
  test::expect_bitwise_equal("bf16 layer_norm dx in place", bf16_values(dout_in_place),
                             bf16_values(want_dx));

  // Mixed dtypes are refused.
  Tensor f32_out = Tensor::empty({kRows, kCols});
  EXPECT_THROW(layer_norm_forward(f32_out, mean, rstd, to_bf16(x), to_bf16(weight), to_bf16(bias)),
               InternalError);
  EXPECT_THROW(layer_norm_forward(out, mean, rstd, to_bf16(x), weight, bias), InternalError);
}

TEST(Bf16Ops, CrossEntropyOnBf16Logits) {
  constexpr int kRows = 5, kPadded = 24, kVocab = 21;
  const Tensor logits = random_f32({kRows, kPadded}, 5, -4.0f, 4.0f);
  const Tensor targets = test::i32_tensor({3, kIgnoreIndex, 0, 20, 7}, {kRows});
  constexpr float kDloss = 0.25f;

  Tensor want_losses = Tensor::empty({kRows}), want_lse = Tensor::empty({kRows});
  cross_entropy_forward(want_losses, want_lse, rounded(logits), targets, kVocab);
  Tensor want_dlogits = Tensor::empty({kRows, kPadded});
  cross_entropy_backward(want_dlogits, rounded(logits), want_lse, targets, kDloss, kVocab);

  const Tensor logits_bf16 = to_bf16(logits);
  Tensor losses = Tensor::empty({kRows}), lse = Tensor::empty({kRows});
  cross_entropy_forward(losses, lse, logits_bf16, targets, kVocab);
  test::expect_bitwise_equal("bf16 cross_entropy losses", losses.to_vector(),
                             want_losses.to_vector());
  test::expect_bitwise_equal("bf16 cross_entropy lse", lse.to_vector(), want_lse.to_vector());
  EXPECT_EQ(losses.to_vector()[1], 0.0f) << "ignored row";

  Tensor dlogits = Tensor::empty({kRows, kPadded}, DType::BF16);
  cross_entropy_backward(dlogits, logits_bf16, lse, targets, kDloss, kVocab);
  test::expect_bitwise_equal("bf16 cross_entropy dlogits", bf16_values(dlogits),
                             bf16_values(want_dlogits));
  Tensor in_place = to_bf16(logits);
  cross_entropy_backward(in_place, in_place, lse, targets, kDloss, kVocab);
  test::expect_bitwise_equal("bf16 cross_entropy dlogits in place", bf16_values(in_place),
                             bf16_values(want_dlogits));

  // The vocab-parallel pieces on a bf16 shard (global columns [8, 24)).
  const Tensor shard = to_bf16(logits.slice(1, 8, 16).contiguous());
  const Tensor shard_f32 = rounded(logits.slice(1, 8, 16).contiguous());
  Tensor row_max = Tensor::empty({kRows}), want_row_max = Tensor::empty({kRows});
  cross_entropy_row_max(row_max, shard, 8, kVocab);
  cross_entropy_row_max(want_row_max, shard_f32, 8, kVocab);
  test::expect_bitwise_equal("bf16 row_max", row_max.to_vector(), want_row_max.to_vector());
  Tensor sum_exp = Tensor::empty({kRows}), want_sum_exp = Tensor::empty({kRows});
  cross_entropy_row_sum_exp(sum_exp, shard, want_lse, 8, kVocab);
  cross_entropy_row_sum_exp(want_sum_exp, shard_f32, want_lse, 8, kVocab);
  test::expect_bitwise_equal("bf16 row_sum_exp", sum_exp.to_vector(), want_sum_exp.to_vector());
  Tensor target_logit = Tensor::empty({kRows}), want_target_logit = Tensor::empty({kRows});
  cross_entropy_target_logit(target_logit, shard, targets, 8, kVocab);
  cross_entropy_target_logit(want_target_logit, shard_f32, targets, 8, kVocab);
  test::expect_bitwise_equal("bf16 target_logit", target_logit.to_vector(),
                             want_target_logit.to_vector());
  Tensor f32_dlogits = Tensor::empty({kRows, kPadded});
  EXPECT_THROW(cross_entropy_backward(f32_dlogits, logits_bf16, lse, targets, kDloss, kVocab),
               InternalError)
      << "dlogits in another dtype than logits";
}

TEST(Bf16Ops, EmbeddingsWithBf16Tables) {
  constexpr int kB = 2, kT = 5, kC = 12, kVLocal = 9, kVocabStart = 4, kTMax = 7;
  // Tokens inside and outside the shard [4, 13), with repeats.
  const Tensor tokens = test::i32_tensor({4, 12, 0, 7, 7, 3, 13, 4, 9, 7}, {kB, kT});
  const Tensor wte = random_f32({kVLocal, kC}, 6), wpe = random_f32({kTMax, kC}, 7);
  const Tensor dout = random_f32({kB, kT, kC}, 8);

  Tensor want_out = Tensor::empty({kB, kT, kC});
  token_embedding_forward(want_out, tokens, rounded(wte), kVocabStart);
  position_embedding_forward(want_out, rounded(wpe));
  Tensor out = Tensor::empty({kB, kT, kC}, DType::BF16);
  token_embedding_forward(out, tokens, to_bf16(wte), kVocabStart);
  // The token rows are bf16 values already, so rounding the sum once is all that differs.
  position_embedding_forward(out, to_bf16(wpe));
  test::expect_bitwise_equal("bf16 token + position embedding", bf16_values(out),
                             bf16_values(want_out));

  Tensor want_dwte = Tensor::full({kVLocal, kC}, 0.5f), want_dwpe = Tensor::full({kTMax, kC}, 1.0f);
  token_embedding_backward(want_dwte, rounded(dout), tokens, kVocabStart);
  position_embedding_backward(want_dwpe, rounded(dout));
  Tensor dwte = Tensor::full({kVLocal, kC}, 0.5f), dwpe = Tensor::full({kTMax, kC}, 1.0f);
  token_embedding_backward(dwte, to_bf16(dout), tokens, kVocabStart);
  position_embedding_backward(dwpe, to_bf16(dout));
  test::expect_bitwise_equal("bf16 dout -> dwte (f32)", dwte.to_vector(), want_dwte.to_vector());
  test::expect_bitwise_equal("bf16 dout -> dwpe (f32)", dwpe.to_vector(), want_dwpe.to_vector());

  Tensor bf16_dwte = Tensor::zeros({kVLocal, kC}, DType::BF16);
  EXPECT_THROW(token_embedding_backward(bf16_dwte, to_bf16(dout), tokens, kVocabStart),
               InternalError)
      << "parameter gradients are f32";
}

TEST(Bf16Ops, DropoutOnBf16) {
  constexpr int kB = 2, kT = 6, kC = 33;
  constexpr float kP = 0.3f;
  const RngStream stream = dropout_stream(99, 3, "bf16.dropout");
  const GlobalPosition position{1, 2, 10};
  const Tensor x = random_f32({kB, kT, kC}, 9, 0.5f, 1.5f);
  Tensor want = Tensor::empty({kB, kT, kC});
  dropout_forward(want, rounded(x), kP, stream, position);
  Tensor out = Tensor::empty({kB, kT, kC}, DType::BF16);
  dropout_forward(out, to_bf16(x), kP, stream, position);
  test::expect_bitwise_equal("bf16 dropout forward", bf16_values(out), bf16_values(want));
  Tensor dx = to_bf16(x);  // in place
  dropout_backward(dx, dx, kP, stream, position);
  test::expect_bitwise_equal("bf16 dropout backward in place", bf16_values(dx),
                             bf16_values(want));
}

}  // namespace
}  // namespace ternion
