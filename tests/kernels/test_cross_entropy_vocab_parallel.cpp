// Vocab-parallel cross-entropy: the logits split by columns into shards, each shard's pieces
// (row_max, sum_exp, target_logit) combined as the ranks' all-reduces would combine them and
// finished, against cross_entropy_forward on the whole logits (f32 ops and f64 templates, even
// and uneven shard widths, one rank, huge logits in one shard); the sharded backward against
// the column slice of the whole backward and against finite differences of the composed
// forward; shards made only of padding and ignored rows contribute nothing; bad targets,
// bad shard offsets and devices without kernels throw.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cross_entropy.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kRows = 21;
const std::vector<int> kIgnoredRows = {2, 11, 17};
constexpr float kInf = std::numeric_limits<float>::infinity();

// A vocabulary of vocab_size real columns padded to padded_vocab, split into shards of the
// given widths, in order.
struct Layout {
  std::string name;
  int vocab_size;
  int padded_vocab;
  std::vector<int> widths;

  int start(std::size_t shard) const {
    int s = 0;
    for (std::size_t k = 0; k < shard; ++k) s += widths[k];
    return s;
  }
  bool padding_only(std::size_t shard) const { return start(shard) >= vocab_size; }
  std::string label(std::size_t shard, const std::string& what) const {
    return name + ", shard " + std::to_string(shard) + ": " + what;
  }
};

const std::vector<Layout> kLayouts = {
    {"37 of 40 on one rank", 37, 40, {40}},
    {"37 of 40 in 2", 37, 40, {20, 20}},
    {"37 of 40 in 4", 37, 40, {10, 10, 10, 10}},
    {"37 of 40 in 13/13/14", 37, 40, {13, 13, 14}},
    {"37 of 40 in 1/35/4", 37, 40, {1, 35, 4}},
    {"29 of 48 in 2", 29, 48, {24, 24}},
    {"29 of 48 in 4", 29, 48, {12, 12, 12, 12}},  // the last shard is all padding
    {"29 of 48 in 7/25/16", 29, 48, {7, 25, 16}},  // so is this one's
};

// Random targets, with the first and last token, the first column of some shards, and ignored
// rows among them.
std::vector<std::int32_t> random_targets(const Layout& layout, std::uint64_t seed) {
  auto targets = test::random_ints(kRows, seed, 0, layout.vocab_size);
  targets[4] = layout.vocab_size - 1;
  targets[5] = 0;
  for (std::size_t k = 0; k < layout.widths.size() && k < 4; ++k)
    if (!layout.padding_only(k)) targets[6 + k] = layout.start(k);
  for (int r : kIgnoredRows) targets[r] = kIgnoreIndex;
  return targets;
}

// Logits with padded columns set to large values: they would dominate the softmax if read.
std::vector<float> random_logits(const Layout& layout, std::uint64_t seed, float scale) {
  const int cols = layout.padded_vocab;
  auto logits = test::random_floats(static_cast<std::size_t>(kRows) * cols, seed, -scale, scale);
  for (int r = 0; r < kRows; ++r)
    for (int v = layout.vocab_size; v < cols; ++v) logits[r * cols + v] = 50.0f + v;
  return logits;
}

// Shard k's columns of row-major [kRows, padded_vocab] values, as row-major [kRows, width_k].
template <class T>
std::vector<T> shard_columns(const std::vector<T>& whole, const Layout& layout,
                             std::size_t shard) {
  const int start = layout.start(shard), width = layout.widths[shard];
  std::vector<T> out(static_cast<std::size_t>(kRows) * width);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < width; ++c) out[r * width + c] = whole[r * layout.padded_vocab + start + c];
  return out;
}

// The per-shard pieces and the finished losses, with each all-reduce done here.
template <class T>
struct ShardedForward {
  std::vector<std::vector<T>> row_max, sum_exp, target_logit;  // per shard
  std::vector<T> global_max, global_sum_exp, global_target_logit, losses, lse;
};

// Through the f32 Tensor ops, as a vocab-parallel LM head would run them.
ShardedForward<float> sharded_forward_op(const std::vector<Tensor>& shards, const Layout& layout,
                                         const Tensor& targets) {
  ShardedForward<float> f;
  f.global_max.assign(kRows, -kInf);
  for (std::size_t k = 0; k < shards.size(); ++k) {
    Tensor row_max = Tensor::full({kRows}, NAN);
    cross_entropy_row_max(row_max, shards[k], layout.start(k), layout.vocab_size);
    f.row_max.push_back(row_max.to_vector());
    for (int r = 0; r < kRows; ++r) f.global_max[r] = std::max(f.global_max[r], f.row_max[k][r]);
  }
  const Tensor global_max = Tensor::from_vector(f.global_max, {kRows});
  f.global_sum_exp.assign(kRows, 0.0f);
  f.global_target_logit.assign(kRows, 0.0f);
  for (std::size_t k = 0; k < shards.size(); ++k) {
    Tensor sum_exp = Tensor::full({kRows}, NAN), target_logit = Tensor::full({kRows}, NAN);
    cross_entropy_row_sum_exp(sum_exp, shards[k], global_max, layout.start(k), layout.vocab_size);
    cross_entropy_target_logit(target_logit, shards[k], targets, layout.start(k),
                               layout.vocab_size);
    f.sum_exp.push_back(sum_exp.to_vector());
    f.target_logit.push_back(target_logit.to_vector());
    for (int r = 0; r < kRows; ++r) {
      f.global_sum_exp[r] += f.sum_exp[k][r];
      f.global_target_logit[r] += f.target_logit[k][r];
    }
  }
  Tensor losses = Tensor::full({kRows}, NAN), lse = Tensor::full({kRows}, NAN);
  cross_entropy_finish(losses, lse, global_max, Tensor::from_vector(f.global_sum_exp, {kRows}),
                       Tensor::from_vector(f.global_target_logit, {kRows}), targets);
  f.losses = losses.to_vector();
  f.lse = lse.to_vector();
  return f;
}

// Through the CPU templates, for f64.
template <class T>
ShardedForward<T> sharded_forward_cpu(const std::vector<std::vector<T>>& shards,
                                      const Layout& layout,
                                      const std::vector<std::int32_t>& targets) {
  ShardedForward<T> f;
  f.global_max.assign(kRows, -std::numeric_limits<T>::infinity());
  for (std::size_t k = 0; k < shards.size(); ++k) {
    f.row_max.emplace_back(kRows, NAN);
    cpu::cross_entropy_row_max<T>(f.row_max[k].data(), shards[k].data(), kRows, layout.widths[k],
                                  layout.start(k), layout.vocab_size);
    for (int r = 0; r < kRows; ++r) f.global_max[r] = std::max(f.global_max[r], f.row_max[k][r]);
  }
  f.global_sum_exp.assign(kRows, 0);
  f.global_target_logit.assign(kRows, 0);
  for (std::size_t k = 0; k < shards.size(); ++k) {
    f.sum_exp.emplace_back(kRows, NAN);
    f.target_logit.emplace_back(kRows, NAN);
    cpu::cross_entropy_row_sum_exp<T>(f.sum_exp[k].data(), shards[k].data(), f.global_max.data(),
                                      kRows, layout.widths[k], layout.start(k), layout.vocab_size);
    cpu::cross_entropy_target_logit<T>(f.target_logit[k].data(), shards[k].data(), targets.data(),
                                       kRows, layout.widths[k], layout.start(k),
                                       layout.vocab_size, kIgnoreIndex);
    for (int r = 0; r < kRows; ++r) {
      f.global_sum_exp[r] += f.sum_exp[k][r];
      f.global_target_logit[r] += f.target_logit[k][r];
    }
  }
  f.losses.assign(kRows, NAN);
  f.lse.assign(kRows, NAN);
  cpu::cross_entropy_finish<T>(f.losses.data(), f.lse.data(), f.global_max.data(),
                               f.global_sum_exp.data(), f.global_target_logit.data(),
                               targets.data(), kRows, kIgnoreIndex);
  return f;
}

std::vector<Tensor> shard_tensors(const std::vector<float>& whole, const Layout& layout) {
  std::vector<Tensor> shards;
  for (std::size_t k = 0; k < layout.widths.size(); ++k)
    shards.push_back(
        Tensor::from_vector(shard_columns(whole, layout, k), {kRows, layout.widths[k]}));
  return shards;
}

struct WholeForward {
  std::vector<float> losses, lse;
};

WholeForward whole_forward(const std::vector<float>& logits, const Layout& layout,
                           const Tensor& targets) {
  Tensor losses = Tensor::full({kRows}, NAN), lse = Tensor::full({kRows}, NAN);
  cross_entropy_forward(losses, lse,
                        Tensor::from_vector(logits, {kRows, layout.padded_vocab}), targets,
                        layout.vocab_size);
  return {losses.to_vector(), lse.to_vector()};
}

TEST(CrossEntropyVocabParallel, ShardedForwardMatchesWholeForward) {
  for (const Layout& layout : kLayouts) {
    const auto targets_v = random_targets(layout, 1);
    const Tensor targets = test::i32_tensor(targets_v, {kRows});
    const auto logits = random_logits(layout, 2, 4.0f);
    const auto want = whole_forward(logits, layout, targets);
    const auto got = sharded_forward_op(shard_tensors(logits, layout), layout, targets);
    test::expect_close(layout.name + ": sharded losses", got.losses, want.losses, 0, 1e-6);
    test::expect_close(layout.name + ": sharded lse", got.lse, want.lse, 0, 1e-6);
  }
}

TEST(CrossEntropyVocabParallel, ShardedTemplatesMatchWholeTemplateInDouble) {
  for (const Layout& layout : kLayouts) {
    const auto targets = random_targets(layout, 3);
    auto logits = test::convert<double>(random_logits(layout, 4, 4.0f));
    // Rows far apart in scale: the shift must be the row's own global max.
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < layout.vocab_size; ++v)
        logits[r * layout.padded_vocab + v] += 300.0 * (r % 3 - 1);
    std::vector<double> want_losses(kRows, NAN), want_lse(kRows, NAN);
    cpu::cross_entropy_forward<double>(want_losses.data(), want_lse.data(), logits.data(),
                                       targets.data(), kRows, layout.padded_vocab,
                                       layout.vocab_size, kIgnoreIndex);
    std::vector<std::vector<double>> shards;
    for (std::size_t k = 0; k < layout.widths.size(); ++k)
      shards.push_back(shard_columns(logits, layout, k));
    const auto got = sharded_forward_cpu(shards, layout, targets);
    test::expect_close(layout.name + ": f64 sharded losses", got.losses, want_losses, 1e-12,
                       1e-13);
    test::expect_close(layout.name + ": f64 sharded lse", got.lse, want_lse, 0, 1e-14);
  }
}

// Without the shift by the global max, e^104 would overflow f32 in the shard holding it.
TEST(CrossEntropyVocabParallel, HugeLogitsInOneShardStayFinite) {
  const Layout& layout = kLayouts[3];  // 13/13/14
  const auto targets_v = random_targets(layout, 5);
  const Tensor targets = test::i32_tensor(targets_v, {kRows});
  auto logits = random_logits(layout, 6, 4.0f);
  for (int r = 0; r < kRows; ++r) {
    const std::size_t shard = static_cast<std::size_t>(r) % layout.widths.size();
    for (int c = 0; c < layout.widths[shard]; ++c)
      if (layout.start(shard) + c < layout.vocab_size)
        logits[r * layout.padded_vocab + layout.start(shard) + c] += 100.0f;
  }
  const auto want = whole_forward(logits, layout, targets);
  const auto got = sharded_forward_op(shard_tensors(logits, layout), layout, targets);
  // lse is about 100 here, where an f32 ulp is 7.6e-6: compare in units of it.
  test::expect_close(layout.name + ": losses with huge logits", got.losses, want.losses, 2e-5,
                     1e-6);
  test::expect_close(layout.name + ": lse with huge logits", got.lse, want.lse, 0, 1e-6);
}

TEST(CrossEntropyVocabParallel, ShardedBackwardIsColumnSliceOfWholeBackward) {
  constexpr float kDloss = 1.0f / 18.0f;
  for (const Layout& layout : kLayouts) {
    const auto targets_v = random_targets(layout, 7);
    const Tensor targets = test::i32_tensor(targets_v, {kRows});
    const auto logits = random_logits(layout, 8, 5.0f);
    const Tensor whole = Tensor::from_vector(logits, {kRows, layout.padded_vocab});
    Tensor losses = Tensor::empty({kRows}), lse = Tensor::empty({kRows});
    cross_entropy_forward(losses, lse, whole, targets, layout.vocab_size);
    Tensor dwhole = Tensor::full({kRows, layout.padded_vocab}, NAN);
    cross_entropy_backward(dwhole, whole, lse, targets, kDloss, layout.vocab_size);
    const auto dwhole_v = dwhole.to_vector();

    const auto shards = shard_tensors(logits, layout);
    const auto sharded = sharded_forward_op(shards, layout, targets);
    const Tensor combined_lse = Tensor::from_vector(sharded.lse, {kRows});
    for (std::size_t k = 0; k < shards.size(); ++k) {
      const auto want = shard_columns(dwhole_v, layout, k);
      Tensor dshard = Tensor::full(shards[k].shape(), NAN);
      cross_entropy_backward(dshard, shards[k], lse, targets, kDloss, layout.vocab_size,
                             kIgnoreIndex, layout.start(k));
      test::expect_bitwise_equal(layout.label(k, "dlogits with the whole lse"),
                                 dshard.to_vector(), want);
      cross_entropy_backward(dshard, shards[k], combined_lse, targets, kDloss,
                             layout.vocab_size, kIgnoreIndex, layout.start(k));
      test::expect_close(layout.label(k, "dlogits with the combined lse"), dshard.to_vector(),
                         want, 1e-7, 0);
      Tensor in_place = shards[k].clone();
      cross_entropy_backward(in_place, in_place, combined_lse, targets, kDloss,
                             layout.vocab_size, kIgnoreIndex, layout.start(k));
      test::expect_bitwise_equal(layout.label(k, "dlogits in place"), in_place.to_vector(),
                                 dshard.to_vector());
    }
  }
}

TEST(CrossEntropyVocabParallel, PaddingOnlyShardContributesNothing) {
  int checked = 0;
  for (const Layout& layout : kLayouts) {
    const auto targets_v = random_targets(layout, 9);
    const Tensor targets = test::i32_tensor(targets_v, {kRows});
    auto logits = random_logits(layout, 10, 4.0f);
    std::vector<Tensor> shards = shard_tensors(logits, layout);
    const auto with_it = sharded_forward_op(shards, layout, targets);

    for (std::size_t k = 0; k < shards.size(); ++k) {
      if (!layout.padding_only(k)) continue;
      ++checked;
      test::expect_bitwise_equal(layout.label(k, "row_max"), with_it.row_max[k],
                                 std::vector<float>(kRows, -kInf));
      test::expect_bitwise_equal(layout.label(k, "sum_exp"), with_it.sum_exp[k],
                                 std::vector<float>(kRows, 0.0f));
      test::expect_bitwise_equal(layout.label(k, "target_logit"), with_it.target_logit[k],
                                 std::vector<float>(kRows, 0.0f));
      Tensor dshard = Tensor::full(shards[k].shape(), NAN);
      cross_entropy_backward(dshard, shards[k], Tensor::from_vector(with_it.lse, {kRows}),
                             targets, 0.5f, layout.vocab_size, kIgnoreIndex, layout.start(k));
      test::expect_bitwise_equal(layout.label(k, "dlogits"), dshard.to_vector(),
                                 std::vector<float>(shards[k].numel(), 0.0f));
      // The shard's values are never read: NaN and infinities there change nothing.
      Tensor poisoned = Tensor::full(shards[k].shape(), NAN);
      float* p = poisoned.data<float>();
      for (std::int64_t i = 0; i < poisoned.numel(); i += 3) p[i] = (i % 2 ? kInf : -kInf);
      std::vector<Tensor> poisoned_shards = shards;
      poisoned_shards[k] = poisoned;
      const auto with_poison = sharded_forward_op(poisoned_shards, layout, targets);
      test::expect_bitwise_equal(layout.label(k, "losses with the shard poisoned"),
                                 with_poison.losses, with_it.losses);
      test::expect_bitwise_equal(layout.label(k, "lse with the shard poisoned"), with_poison.lse,
                                 with_it.lse);
    }
  }
  EXPECT_EQ(checked, 2) << "layouts with a padding-only shard";
}

TEST(CrossEntropyVocabParallel, IgnoredRowsHaveZeroLossAndGradientOnEveryShard) {
  for (const Layout& layout : kLayouts) {
    const auto targets_v = random_targets(layout, 11);
    const Tensor targets = test::i32_tensor(targets_v, {kRows});
    const auto logits = random_logits(layout, 12, 4.0f);
    const auto shards = shard_tensors(logits, layout);
    const auto f = sharded_forward_op(shards, layout, targets);
    for (std::size_t k = 0; k < shards.size(); ++k) {
      Tensor dshard = Tensor::full(shards[k].shape(), NAN);
      cross_entropy_backward(dshard, shards[k], Tensor::from_vector(f.lse, {kRows}), targets,
                             0.25f, layout.vocab_size, kIgnoreIndex, layout.start(k));
      const auto d = dshard.to_vector();
      std::vector<float> ignored_grad, ignored_target_logit;
      for (int r : kIgnoredRows) {
        ignored_target_logit.push_back(f.target_logit[k][r]);
        for (int c = 0; c < layout.widths[k]; ++c)
          ignored_grad.push_back(d[r * layout.widths[k] + c]);
      }
      test::expect_bitwise_equal(layout.label(k, "dlogits of ignored rows"), ignored_grad,
                                 std::vector<float>(ignored_grad.size(), 0.0f));
      test::expect_bitwise_equal(layout.label(k, "target_logit of ignored rows"),
                                 ignored_target_logit,
                                 std::vector<float>(ignored_target_logit.size(), 0.0f));
    }
    std::vector<float> ignored_losses;
    for (int r : kIgnoredRows) ignored_losses.push_back(f.losses[r]);
    test::expect_bitwise_equal(layout.name + ": losses of ignored rows", ignored_losses,
                               std::vector<float>(ignored_losses.size(), 0.0f));
  }
}

// The loss as a function of one shard's logits, the other shards fixed: its gradient is that
// shard's backward with the combined lse.
TEST(CrossEntropyVocabParallel, ShardedBackwardMatchesFiniteDifferences) {
  for (const Layout& layout : {kLayouts[3], kLayouts[4], kLayouts[6]}) {
    const auto targets = random_targets(layout, 13);
    const auto logits = test::convert<double>(random_logits(layout, 14, 3.0f));
    const double dloss = 1.0 / (kRows - static_cast<double>(kIgnoredRows.size()));  // a mean
    std::vector<std::vector<double>> shards;
    for (std::size_t k = 0; k < layout.widths.size(); ++k)
      shards.push_back(shard_columns(logits, layout, k));
    for (std::size_t k = 0; k < shards.size(); ++k) {
      auto loss = [&] {
        double total = 0;
        for (double l : sharded_forward_cpu(shards, layout, targets).losses) total += l;
        return dloss * total;
      };
      const auto want = test::finite_difference_gradient(shards[k], loss);
      const auto lse = sharded_forward_cpu(shards, layout, targets).lse;
      std::vector<double> dshard(shards[k].size(), NAN);
      cpu::cross_entropy_backward<double>(dshard.data(), shards[k].data(), lse.data(),
                                          targets.data(), dloss, kRows, layout.widths[k],
                                          layout.start(k), layout.vocab_size, kIgnoreIndex);
      test::expect_close(layout.label(k, "f64 dlogits vs finite differences"), dshard, want,
                         1e-9, 1e-6);
    }
  }
}

TEST(CrossEntropyVocabParallel, TargetOutsideVocabularyThrowsOnEveryShard) {
  const Layout& layout = kLayouts[3];  // 13/13/14: the last shard holds the padding 37..39
  for (std::int32_t bad : {layout.vocab_size, layout.padded_vocab + 5, -1}) {
    auto targets_v = random_targets(layout, 15);
    targets_v[3] = bad;
    const Tensor targets = test::i32_tensor(targets_v, {kRows});
    const auto shards = shard_tensors(random_logits(layout, 16, 1.0f), layout);
    for (std::size_t k = 0; k < shards.size(); ++k) {
      Tensor target_logit = Tensor::empty({kRows}), d = Tensor::empty(shards[k].shape());
      EXPECT_THROW(cross_entropy_target_logit(target_logit, shards[k], targets, layout.start(k),
                                              layout.vocab_size),
                   DataError)
          << layout.label(k, "target " + std::to_string(bad));
      EXPECT_THROW(cross_entropy_backward(d, shards[k], Tensor::zeros({kRows}), targets, 1.0f,
                                          layout.vocab_size, kIgnoreIndex, layout.start(k)),
                   DataError)
          << layout.label(k, "target " + std::to_string(bad));
    }
  }
  // A target in another rank's shard is a valid token.
  const auto shards = shard_tensors(random_logits(layout, 17, 1.0f), layout);
  const Tensor targets = test::i32_tensor(std::vector<std::int32_t>(kRows, 36), {kRows});
  Tensor target_logit = Tensor::full({kRows}, NAN);
  EXPECT_NO_THROW(cross_entropy_target_logit(target_logit, shards[0], targets, 0, 37));
  test::expect_bitwise_equal("target_logit of targets in another shard",
                             target_logit.to_vector(), std::vector<float>(kRows, 0.0f));
}

TEST(CrossEntropyVocabParallel, MisuseAndDevicesWithoutKernels) {
  Tensor logits = Tensor::zeros({4, 8}), rows = Tensor::empty({4});
  const Tensor targets = test::i32_tensor({0, 1, 2, 3}, {4});
  EXPECT_THROW(cross_entropy_row_max(rows, logits, -1, 8), InternalError) << "vocab_start -1";
  EXPECT_THROW(cross_entropy_row_max(rows, logits, 0, 0), InternalError) << "vocab_size 0";
  EXPECT_THROW(cross_entropy_row_sum_exp(rows, logits, Tensor::zeros({5}), 0, 8), InternalError)
      << "global_max of the wrong length";
  EXPECT_THROW(cross_entropy_target_logit(rows, logits, Tensor::zeros({4}), 0, 8), InternalError)
      << "f32 targets";
  EXPECT_THROW(cross_entropy_finish(rows, rows, rows, rows, Tensor::empty({3}), targets),
               InternalError)
      << "target_logit of the wrong length";
  Tensor d = Tensor::empty({4, 8});
  EXPECT_THROW(cross_entropy_backward(d, logits, rows, targets, 1.0f, 8, kIgnoreIndex, -3),
               InternalError)
      << "backward with vocab_start -3";

  // Host memory labelled as CUDA memory: enough to reach the dispatch, which must not touch it.
  auto memory = std::make_shared<std::vector<float>>(64, 0.0f);
  auto on_gpu = [&](const Shape& shape, DType dtype) {
    return Tensor::wrap(memory->data(), shape, dtype, Device::cuda(0), memory);
  };
  Tensor g_logits = on_gpu({4, 8}, DType::F32), g_rows = on_gpu({4}, DType::F32);
  const Tensor g_targets = on_gpu({4}, DType::I32);
  EXPECT_THROW(cross_entropy_row_max(g_rows, g_logits, 0, 8), CudaError);
  EXPECT_THROW(cross_entropy_row_sum_exp(g_rows, g_logits, g_rows, 0, 8), CudaError);
  EXPECT_THROW(cross_entropy_target_logit(g_rows, g_logits, g_targets, 0, 8), CudaError);
  EXPECT_THROW(cross_entropy_finish(g_rows, g_rows, g_rows, g_rows, g_rows, g_targets), CudaError);
  EXPECT_THROW(cross_entropy_backward(g_logits, g_logits, g_rows, g_targets, 1.0f, 8,
                                      kIgnoreIndex, 8),
               CudaError);
  EXPECT_THROW(cross_entropy_row_max(rows, g_logits, 0, 8), InternalError) << "mixed devices";
}

}  // namespace
}  // namespace ternion
