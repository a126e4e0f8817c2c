// DataBlend and the sampler over it: components opened and refused, a blend of one reading as
// the plain path, each dataset's share of the draws against its weight, the draws against the
// formula written out by hand, and any split of the global batch reading as the whole.
#include "data/data_blend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "data/batch_sampler.h"
#include "data_test_support.h"
#include "framework/philox.h"

namespace ternion {
namespace {

using test::expect_same_ints;
using test::ints_of;
using test::TempDir;
using test::write_counting;

void expect_same_batches(const std::string& label, const TokenBatch& got, const TokenBatch& want) {
  expect_same_ints(label + " inputs", ints_of(got.inputs), ints_of(want.inputs));
  expect_same_ints(label + " targets", ints_of(got.targets), ints_of(want.targets));
}

TEST(DataBlend, OpensEveryComponent) {
  TempDir dir;
  write_counting(dir, "web_0.bin", 40, 0);
  write_counting(dir, "web_1.bin", 50, 100);
  write_counting(dir, "books.bin", 30, 1000);
  const DataBlend blend =
      DataBlend::open("data.train", "3 " + dir.file("web_*.bin") + " 1 " + dir.file("books.bin"));
  ASSERT_EQ(blend.components().size(), 2u);
  EXPECT_EQ(blend.components()[0].weight, 0.75);
  EXPECT_EQ(blend.components()[0].path, dir.file("web_*.bin"));
  EXPECT_EQ(blend.components()[0].data.shards().size(), 2u);
  EXPECT_EQ(blend.components()[1].weight, 0.25);
  EXPECT_EQ(blend.components()[1].data.name(), "data.train '" + dir.file("books.bin") + "'");
  EXPECT_EQ(blend.token_count(), 120);
  EXPECT_EQ(blend.max_token(), 1029u);
  EXPECT_EQ(blend.paths(), (std::vector<std::string>{dir.file("web_0.bin"), dir.file("web_1.bin"),
                                                     dir.file("books.bin")}));
}

TEST(DataBlend, Refusals) {
  TempDir dir;
  write_counting(dir, "a.bin", 40, 0);
  write_counting(dir, "b.bin", 40, 0);
  std::filesystem::create_symlink(dir.file("a.bin"), dir.file("link.bin"));
  auto refused = [&](const std::string& spec, const std::vector<std::string>& parts) {
    test::expect_error<DataError>(
        spec, [&] { DataBlend::open("data.train", spec); }, parts);
  };
  refused("1 " + dir.file("a.bin") + " 1 " + dir.file("x_*.bin"),
          {"data.train '", "x_*.bin' matches no file"});
  refused("1 " + dir.file("a.bin") + " 1 " + dir.file("gone.bin"),
          {"data.train", "gone.bin", "cannot open"});
  // The same file in two components, under its name or another.
  refused("1 " + dir.file("a.bin") + " 1 " + dir.file("*.bin"),
          {"data.train: the file '", "a.bin' is in two components of the blend, '",
           dir.file("a.bin") + "' and '" + dir.file("*.bin") + "'", "give each file one weight"});
  refused("1 " + dir.file("a.bin") + " 1 " + dir.file("link.bin"),
          {"is in two components of the blend", "give each file one weight"});
  // Datasets of two token widths come from two tokenizers.
  write_token_file(dir.file("narrow.bin"), std::vector<std::int64_t>(40, 7), TokenWidth::U16);
  refused("1 " + dir.file("a.bin") + " 1 " + dir.file("narrow.bin"),
          {"data.train: '", "narrow.bin' holds uint16 tokens but '", "a.bin' holds uint32",
           "the datasets come from different tokenizers"});
}

TEST(DataBlend, ValidationTakesNoWeights) {
  TempDir dir;
  write_counting(dir, "val.bin", 40, 0);
  EXPECT_EQ(open_unweighted("data.val", dir.file("val.bin")).token_count(), 40);
  const std::string spec = "1 " + dir.file("val.bin");
  test::expect_error<DataError>(
      "weighted data.val", [&] { open_unweighted("data.val", spec); },
      {"data.val '" + spec + "': weights are for data.train", "read in order"});
  // A missing path with a space in it is a missing path, not a malformed blend.
  test::expect_error<DataError>("missing data.val",
                                [&] { open_unweighted("data.val", dir.file("my val.bin")); },
                                {"data.val", "my val.bin", "cannot open"});
}

// Validation text must be in none of the blend's datasets, not only the first.
TEST(DataBlend, ValidationSharingAComponentsFileIsRefused) {
  TempDir dir;
  write_counting(dir, "web.bin", 40, 0);
  write_counting(dir, "books.bin", 40, 0);
  write_counting(dir, "val.bin", 40, 0);
  const DataBlend train =
      DataBlend::open("data.train", "1 " + dir.file("web.bin") + " 1 " + dir.file("books.bin"));
  EXPECT_NO_THROW(refuse_shared_shards(train, TokenDataset::open("data.val", dir.file("val.bin"))));
  test::expect_error<DataError>(
      "second component",
      [&] { refuse_shared_shards(train, TokenDataset::open("data.val", dir.file("books.bin"))); },
      {"data.val '", "is also a file of data.train '" + dir.file("books.bin") + "'",
       "validation would measure text the model trains on"});
}

// "1 PATH" (any weight) reads batch for batch what "PATH" reads, over several shards.
TEST(BlendSampler, ABlendOfOneReadsAsThePlainPath) {
  TempDir dir;
  write_counting(dir, "train_0.bin", 400, 0);
  write_counting(dir, "train_1.bin", 900, 10000);
  const std::string glob = dir.file("train_*.bin");
  const TokenDataset dataset = TokenDataset::open("data.train", glob);
  const BatchSampler reference(dataset, 16, 7, "data.train");
  for (const std::string& spec : {glob, "1 " + glob, "2.5 " + glob}) {
    const DataBlend blend = DataBlend::open("data.train", spec);
    const BatchSampler sampler(blend, 16, 7, "data.train");
    for (std::int64_t step = 1; step <= 20; ++step)
      expect_same_batches("'" + spec + "' step " + std::to_string(step),
                          sampler.sample(step, 0, 12), reference.sample(step, 0, 12));
  }
}

// A blend of A (weight 0.6, two shards), B (0.3) and C (0.1): sequence g of step s is the
// dataset the hand-written u picks and the start the dataset formula gives within it.
TEST(BlendSampler, DrawsFollowTheFormula) {
  TempDir dir;
  write_counting(dir, "a_0.bin", 300, 0);
  write_counting(dir, "a_1.bin", 200, 10000);
  write_counting(dir, "b.bin", 100, 20000);
  write_counting(dir, "c.bin", 700, 30000);
  const std::int64_t seq_len = 8;
  const DataBlend blend =
      DataBlend::open("data.train", "6 " + dir.file("a_*.bin") + " 3 " + dir.file("b.bin") + " 1 " +
                                        dir.file("c.bin"));
  const BatchSampler sampler(blend, seq_len, 11, "data.train");
  struct Shard {
    std::int64_t size, base;
  };
  const std::vector<std::vector<Shard>> datasets{
      {{300, 0}, {200, 10000}}, {{100, 20000}}, {{700, 30000}}};
  const std::vector<double> upper{0.6, 0.9, 1.0};
  auto bits64 = [](const std::string& stream, std::int64_t step, std::int64_t g) {
    const Philox4 r =
        philox_bits({11, mix_stream(hash_name(stream), static_cast<std::uint64_t>(step))},
                    static_cast<std::uint64_t>(g));
    return (std::uint64_t{r.v[1]} << 32) | r.v[0];
  };
  for (std::int64_t step = 1; step <= 10; ++step) {
    const TokenBatch batch = sampler.sample(step, 0, 16);
    for (std::int64_t g = 0; g < 16; ++g) {
      const double u =
          static_cast<double>(bits64("data.train/component", step, g) >> 11) / 9007199254740992.0;
      std::size_t c = 0;
      while (!(u < upper[c])) ++c;
      ASSERT_EQ(sampler.sample_component(step, g), static_cast<std::int64_t>(c))
          << "step " << step << " sequence " << g;
      std::int64_t starts = 0;
      for (const Shard& s : datasets[c]) starts += s.size - seq_len;
      auto start = static_cast<std::int64_t>(bits64("data.train", step, g) %
                                             static_cast<std::uint64_t>(starts));
      std::int64_t first = -1;
      for (const Shard& s : datasets[c]) {
        if (start < s.size - seq_len) {
          first = s.base + start;
          break;
        }
        start -= s.size - seq_len;
      }
      const std::int32_t* in = batch.inputs.data<std::int32_t>() + g * seq_len;
      const std::int32_t* target = batch.targets.data<std::int32_t>() + g * seq_len;
      for (std::int64_t t = 0; t < seq_len; ++t) {
        ASSERT_EQ(in[t], first + t) << "step " << step << " sequence " << g;
        ASSERT_EQ(target[t], first + t + 1) << "step " << step << " sequence " << g;
      }
    }
  }
}

// Over 40,000 draws each dataset's share is within 5 standard deviations of its weight,
// whatever its size: weights, not token counts, set the mix.
TEST(BlendSampler, SharesFollowTheWeights) {
  TempDir dir;
  write_counting(dir, "big.bin", 50000, 0);
  write_counting(dir, "mid.bin", 3000, 100000);
  write_counting(dir, "small.bin", 200, 200000);
  const DataBlend blend =
      DataBlend::open("data.train", "0.1 " + dir.file("big.bin") + " 0.25 " + dir.file("mid.bin") +
                                        " 0.65 " + dir.file("small.bin"));
  const BatchSampler sampler(blend, 32, 2024, "data.train");
  const std::vector<double> weights{0.1, 0.25, 0.65};
  std::vector<std::int64_t> counts(3, 0);
  const std::int64_t steps = 400, batch = 100;
  for (std::int64_t step = 1; step <= steps; ++step) {
    const TokenBatch drawn = sampler.sample(step, 0, batch);
    for (std::int64_t g = 0; g < batch; ++g) {
      const std::int64_t c = sampler.sample_component(step, g);
      ++counts[static_cast<std::size_t>(c)];
      // The window is the chosen dataset's: its first token carries the dataset's base.
      EXPECT_EQ(drawn.inputs.data<std::int32_t>()[g * 32] / 100000, c);
    }
  }
  const auto n = static_cast<double>(steps * batch);
  for (std::size_t c = 0; c < 3; ++c) {
    const double sigma = std::sqrt(n * weights[c] * (1 - weights[c]));
    EXPECT_LT(std::fabs(static_cast<double>(counts[c]) - n * weights[c]), 5 * sigma)
        << "dataset " << c << " drawn " << counts[c] << " times of " << n << ", weight "
        << weights[c];
  }
}

// Data-parallel ranks and micro-batches ask for pieces (first, count) of the global batch:
// together they are the whole batch, sequence for sequence.
TEST(BlendSampler, PiecesOfTheBatchReadAsTheWhole) {
  TempDir dir;
  write_counting(dir, "web.bin", 5000, 0);
  write_counting(dir, "books.bin", 800, 100000);
  const DataBlend blend =
      DataBlend::open("data.train", "0.7 " + dir.file("web.bin") + " 0.3 " + dir.file("books.bin"));
  const BatchSampler sampler(blend, 16, 3, "data.train");
  const BatchSampler other(blend, 16, 3, "data.train");  // another rank's sampler
  for (std::int64_t step : {1, 2, 57}) {
    const TokenBatch whole = sampler.sample(step, 0, 24);
    std::set<std::int64_t> components;
    for (std::int64_t g = 0; g < 24; ++g) components.insert(sampler.sample_component(step, g));
    EXPECT_EQ(components.size(), 2u) << "step " << step << ": one dataset only in 24 draws";
    for (const std::vector<std::int64_t>& cuts :
         {std::vector<std::int64_t>{0, 12, 24}, {0, 6, 12, 18, 24}, {0, 5, 12, 24}}) {
      std::vector<std::int64_t> inputs, targets;
      for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
        const TokenBatch piece = other.sample(step, cuts[p], cuts[p + 1] - cuts[p]);
        for (std::int64_t v : ints_of(piece.inputs)) inputs.push_back(v);
        for (std::int64_t v : ints_of(piece.targets)) targets.push_back(v);
      }
      const std::string label =
          "step " + std::to_string(step) + " in " + std::to_string(cuts.size() - 1) + " pieces";
      expect_same_ints(label + " inputs", inputs, ints_of(whole.inputs));
      expect_same_ints(label + " targets", targets, ints_of(whole.targets));
    }
  }
}

}  // namespace
}  // namespace ternion
