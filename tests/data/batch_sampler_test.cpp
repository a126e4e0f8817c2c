// BatchSampler: windows, determinism, split invariance, offsets against the RNG formula.
#include "data/batch_sampler.h"

#include <gtest/gtest.h>

#include <set>

#include "data_test_support.h"
#include "framework/philox.h"

namespace ternion {
namespace {

using test::expect_same_ints;
using test::ints_of;
using test::TempDir;

// A one-shard dataset whose token i is i (mod 2^16), so a window's first token is its offset.
TokenDataset counting_data(const TempDir& dir, std::int64_t n, const std::string& name = "c.bin") {
  std::vector<std::uint16_t> tokens(n);
  for (std::int64_t i = 0; i < n; ++i) tokens[i] = static_cast<std::uint16_t>(i);
  write_token_file(dir.file(name), tokens);
  return TokenDataset::open("data.train", dir.file(name));
}

// Every row must be the window of seq_len + 1 tokens at `offsets[row]`, shifted for targets.
void expect_windows(const std::string& label, const TokenBatch& batch, const TokenShard& shard,
                    const std::vector<std::int64_t>& offsets, std::int64_t seq_len) {
  const auto count = static_cast<std::int64_t>(offsets.size());
  ASSERT_EQ(batch.inputs.dtype(), DType::I32) << label;
  ASSERT_EQ(batch.targets.dtype(), DType::I32) << label;
  ASSERT_EQ(batch.inputs.shape(), (Shape{count, seq_len})) << label;
  ASSERT_EQ(batch.targets.shape(), (Shape{count, seq_len})) << label;
  std::vector<std::int64_t> want_inputs, want_targets;
  for (std::int64_t offset : offsets) {
    ASSERT_GE(offset, 0) << label;
    ASSERT_LE(offset + seq_len, shard.size() - 1) << label << ": the window's last target "
                                                   << "lies past the end";
    for (std::int64_t t = 0; t < seq_len; ++t) {
      want_inputs.push_back(shard[offset + t]);
      want_targets.push_back(shard[offset + t + 1]);
    }
  }
  expect_same_ints(label + " inputs", ints_of(batch.inputs), want_inputs);
  expect_same_ints(label + " targets", ints_of(batch.targets), want_targets);
}

// The offset formula written out independently of the sampler.
std::int64_t reference_offset(std::uint64_t seed, const std::string& stream, std::int64_t step,
                              std::int64_t g, std::int64_t shard_size, std::int64_t seq_len) {
  Philox4 r = philox_bits({seed, mix_stream(hash_name(stream), static_cast<std::uint64_t>(step))},
                          static_cast<std::uint64_t>(g));
  std::uint64_t bits = (std::uint64_t{r.v[1]} << 32) | r.v[0];
  return static_cast<std::int64_t>(bits % static_cast<std::uint64_t>(shard_size - seq_len));
}

TEST(BatchSampler, OffsetsFollowTheCounterBasedFormula) {
  TempDir dir;
  TokenDataset data = counting_data(dir, 20000);
  BatchSampler sampler(data, 32, 1234, "train");
  std::vector<std::int64_t> got, want;
  for (std::int64_t step = 1; step <= 5; ++step)
    for (std::int64_t g = 0; g < 16; ++g) {
      got.push_back(sampler.sample_offset(step, g));
      want.push_back(reference_offset(1234, "train", step, g, 20000, 32));
    }
  expect_same_ints("offsets", got, want);

  TokenBatch batch = sampler.sample(3, 0, 16);
  std::vector<std::int64_t> offsets;
  for (std::int64_t g = 0; g < 16; ++g) offsets.push_back(reference_offset(1234, "train", 3, g,
                                                                           20000, 32));
  expect_windows("step 3", batch, data.shards()[0], offsets, 32);
}

TEST(BatchSampler, DeterministicAcrossSamplers) {
  TempDir dir;
  TokenDataset data = counting_data(dir, 10000);
  BatchSampler a(data, 64, 42, "train");
  BatchSampler b(data, 64, 42, "train");
  TokenBatch x = a.sample(7, 0, 8), y = b.sample(7, 0, 8), z = a.sample(7, 0, 8);
  expect_same_ints("two samplers inputs", ints_of(x.inputs), ints_of(y.inputs));
  expect_same_ints("two samplers targets", ints_of(x.targets), ints_of(y.targets));
  expect_same_ints("repeated call inputs", ints_of(x.inputs), ints_of(z.inputs));
}

TEST(BatchSampler, AnySplitOfTheGlobalBatchGivesTheSameSequences) {
  TempDir dir;
  TokenDataset data = counting_data(dir, 10000);
  BatchSampler sampler(data, 48, 9, "train");
  for (std::int64_t step : {1, 2, 100}) {
    TokenBatch whole = sampler.sample(step, 0, 8);
    TokenBatch head = sampler.sample(step, 0, 3), tail = sampler.sample(step, 3, 5);
    std::vector<std::int64_t> joined_inputs = ints_of(head.inputs), joined_targets =
                                                                        ints_of(head.targets);
    for (std::int64_t v : ints_of(tail.inputs)) joined_inputs.push_back(v);
    for (std::int64_t v : ints_of(tail.targets)) joined_targets.push_back(v);
    std::string label = "step " + std::to_string(step) + " split 3+5";
    expect_same_ints(label + " inputs", joined_inputs, ints_of(whole.inputs));
    expect_same_ints(label + " targets", joined_targets, ints_of(whole.targets));

    // One sequence at a time, as eight micro-batches of one would ask.
    std::vector<std::int64_t> singles;
    for (std::int64_t g = 0; g < 8; ++g)
      for (std::int64_t v : ints_of(sampler.sample(step, g, 1).inputs)) singles.push_back(v);
    expect_same_ints("step " + std::to_string(step) + " singles", singles, ints_of(whole.inputs));
  }
}

TEST(BatchSampler, StepsSeedsAndStreamsDiffer) {
  TempDir dir;
  TokenDataset data = counting_data(dir, 50000);
  BatchSampler train(data, 16, 5, "train");
  BatchSampler other_seed(data, 16, 6, "train");
  BatchSampler other_stream(data, 16, 5, "other");
  auto firsts = [](const TokenBatch& b) {
    std::vector<std::int64_t> v;
    for (std::int64_t r = 0; r < b.inputs.size(0); ++r)
      v.push_back(b.inputs.data<std::int32_t>()[r * b.inputs.size(1)]);
    return v;
  };
  std::vector<std::int64_t> step1 = firsts(train.sample(1, 0, 8));
  EXPECT_NE(step1, firsts(train.sample(2, 0, 8))) << "steps 1 and 2 drew the same batch";
  EXPECT_NE(step1, firsts(other_seed.sample(1, 0, 8))) << "seeds 5 and 6 drew the same batch";
  EXPECT_NE(step1, firsts(other_stream.sample(1, 0, 8))) << "streams drew the same batch";
  // Within a batch the sequences are distinct draws, not one offset repeated.
  EXPECT_GT(std::set<std::int64_t>(step1.begin(), step1.end()).size(), 4u);
}

TEST(BatchSampler, OffsetsCoverTheWholeRangeAndTheLastWindowFits) {
  TempDir dir;
  const std::int64_t seq_len = 8;
  TokenDataset data = counting_data(dir, seq_len + 4);  // valid starts: 0, 1, 2, 3
  BatchSampler sampler(data, seq_len, 3, "train");
  std::set<std::int64_t> seen;
  std::vector<std::int64_t> offsets;
  for (std::int64_t step = 1; step <= 50; ++step)
    for (std::int64_t g = 0; g < 4; ++g) {
      std::int64_t offset = sampler.sample_offset(step, g);
      ASSERT_GE(offset, 0);
      ASSERT_LE(offset, 3) << "offset " << offset << " leaves no room for the last target";
      seen.insert(offset);
    }
  EXPECT_EQ(seen.size(), 4u) << "some valid start was never drawn in 200 draws";
  for (std::int64_t g = 0; g < 4; ++g) offsets.push_back(sampler.sample_offset(9, g));
  expect_windows("tiny shard", sampler.sample(9, 0, 4), data.shards()[0], offsets, seq_len);
}

TEST(BatchSampler, ExactlyOneWindow) {
  TempDir dir;
  TokenDataset data = counting_data(dir, 17);
  BatchSampler sampler(data, 16, 1, "train");
  expect_windows("one window", sampler.sample(4, 0, 3), data.shards()[0], {0, 0, 0}, 16);
  expect_windows("one window sequential", sampler.sequential(5, 2), data.shards()[0], {0, 0}, 16);
}

TEST(BatchSampler, SequentialWindowsWrap) {
  TempDir dir;
  // 960 = 15 * 64 tokens hold only 14 whole windows: the 15th would need a target at 960.
  TokenDataset data = counting_data(dir, 960);
  BatchSampler sampler(data, 64, 1, "val");
  ASSERT_EQ(sampler.window_count(), 14);
  expect_windows("first windows", sampler.sequential(0, 3), data.shards()[0], {0, 64, 128}, 64);
  expect_windows("wrapping", sampler.sequential(13, 3), data.shards()[0], {13 * 64, 0, 64}, 64);
  expect_windows("second lap", sampler.sequential(15, 1), data.shards()[0], {64}, 64);
}

TEST(BatchSampler, ShardTooSmallForOneSequence) {
  TempDir dir;
  TokenDataset data = counting_data(dir, 16, "tiny.bin");
  test::expect_error<DataError>("too small", [&] { BatchSampler(data, 16, 1, "train"); },
                                {dir.file("tiny.bin"), "16 tokens", "seq_len 16"});
}

}  // namespace
}  // namespace ternion
