// The gradient reducer over every bucket reduction, against sums in double: flat and
// hierarchical (the world's ranks told they sit on 2 nodes of 4, on 2 nodes interleaved, or on
// 4 nodes of 2: plan_grad_reduce takes any node ids), f32 and bf16 on the wire, ZeRO 0, 1 and 2
// (ZeRO-2 over two micro-batches), and ZeRO's all-gather of updated values. Each case checks
// the reduction it asked for is the one that ran, that the shards of a bucket are a partition
// of it, and every element of what this rank's optimizer would read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "mpi_gtest.h"
#include "kernels/elementwise.h"
#include "parallel/gradient_reducer.h"

namespace ternion {
namespace {

constexpr int kMicroBatches = 2;  // ZeRO-2 reduces each micro-batch's gradients
const std::vector<std::int64_t> kNumels = {37, 5, 120, 64, 3, 250, 17};

double gradient(int rank, std::size_t param, std::int64_t element, int micro) {
  return std::sin(1.0 + 0.37 * rank + 1.3 * static_cast<double>(param) +
                  0.011 * static_cast<double>(element) + 0.5 * micro);
}

bool bf16_exact(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0xFFFF) == 0;
}

struct Case {
  std::string nodes;  // "one", "2x4", "2x4 interleaved", "4x2"
  WireType wire = WireType::F32;
  int zero_stage = 0;
};

std::vector<int> node_ids(const std::string& nodes, int size) {
  std::vector<int> ids(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    ids[static_cast<std::size_t>(r)] = nodes == "one" ? 0
                                       : nodes == "2x4" ? r / 4
                                       : nodes == "4x2" ? r / 2
                                                        : r % 2;
  return ids;
}

void check(const Case& c) {
  Communicator& world = testing_mpi::world();
  const int size = world.size(), rank = world.rank();
  SCOPED_TRACE(c.nodes + (c.wire == WireType::BF16 ? ", bf16" : ", f32") + ", ZeRO-" +
               std::to_string(c.zero_stage));
  std::vector<int> members;
  for (int r = 0; r < size; ++r) members.push_back(r);
  const GradReducePlan plan =
      plan_grad_reduce(GradReduceMode::Auto, members, node_ids(c.nodes, size), rank);
  EXPECT_EQ(plan.hierarchical, c.nodes != "one");
  auto reduction = std::make_unique<StagedReduction>(world, plan, c.wire);
  EXPECT_EQ(reduction->describe().rfind(plan.hierarchical ? "hierarchical" : "flat", 0), 0u)
      << reduction->describe();
  // Every chunk index once: the shards partition each bucket.
  Tensor index = Tensor::full({1}, static_cast<float>(reduction->shard_index()));
  Tensor indices = Tensor::empty({size});
  world.all_gather(indices, index);
  const std::vector<float> got_indices = indices.to_vector();
  EXPECT_EQ(std::set<float>(got_indices.begin(), got_indices.end()).size(),
            static_cast<std::size_t>(size));

  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> params;
  for (std::size_t i = 0; i < kNumels.size(); ++i) {
    owned.push_back(std::make_unique<Parameter>());
    owned.back()->name = "p" + std::to_string(i);
    owned.back()->value = Tensor::zeros({kNumels[i]});
    owned.back()->grad = Tensor::zeros({kNumels[i]});
    params.push_back(owned.back().get());
  }
  GradientReducer reducer(params, std::vector<bool>(params.size(), false), std::move(reduction),
                          /*bucket_bytes=*/4 * 100, c.zero_stage);
  ASSERT_GE(reducer.buckets().size(), 3u);
  const int micro_batches = c.zero_stage == 2 ? kMicroBatches : 1;
  reducer.begin_step();
  for (int m = 0; m < micro_batches; ++m) {
    // Backward's order, a layer at a time: gradients written, then reported.
    for (std::size_t i = 0; i < params.size(); ++i) {
      reducer.prepare({params[i]});
      std::vector<float> g(static_cast<std::size_t>(kNumels[i]));
      for (std::int64_t e = 0; e < kNumels[i]; ++e)
        g[static_cast<std::size_t>(e)] = static_cast<float>(gradient(rank, i, e, m));
      Tensor mine = Tensor::from_vector(g, {kNumels[i]});
      accumulate(params[i]->grad, mine);  // as layers do: += (ZeRO-2 keeps the sum so far there)
      reducer.mark_ready({params[i]});
    }
  }
  reducer.finish([] {});

  // What this rank's optimizer reads, against the sum over ranks (and micro-batches).
  std::int64_t compared = 0;
  for (const ParameterSegment& s : reducer.owned_segments()) {
    const std::size_t i = static_cast<std::size_t>(
        std::find(params.begin(), params.end(), s.param) - params.begin());
    const std::vector<float> got = s.grad().to_vector();
    for (std::int64_t e = s.begin; e < s.end; ++e) {
      double want = 0, magnitude = 0;
      for (int r = 0; r < size; ++r)
        for (int m = 0; m < micro_batches; ++m) {
          want += gradient(r, i, e, m);
          magnitude += std::abs(gradient(r, i, e, m));
        }
      const float value = got[static_cast<std::size_t>(e - s.begin)];
      // f32: rounding of the sums; bf16: each contribution rounded once (relative 2^-9), the
      // node's partial sums once more, and the sum once.
      const double tolerance =
          c.wire == WireType::F32 ? 1e-6 * magnitude : 3.0 * std::ldexp(magnitude, -9);
      ASSERT_NEAR(value, want, tolerance) << s.param->name << "[" << e << "]";
      // An all-reduce over a bf16 wire hands every rank the rounded sums.
      if (c.wire == WireType::BF16 && c.zero_stage == 0) {
        ASSERT_TRUE(bf16_exact(value)) << s.param->name << "[" << e << "] = " << value;
      }
      ++compared;
    }
  }
  const std::int64_t total = std::accumulate(kNumels.begin(), kNumels.end(), std::int64_t{0});
  if (c.zero_stage == 0) {
    EXPECT_EQ(compared, total);
  }
  Tensor count = Tensor::full({1}, static_cast<float>(compared));
  world.all_reduce(count, ReduceOp::Sum);
  EXPECT_EQ(count.to_vector()[0], static_cast<float>(c.zero_stage == 0 ? total * size : total));

  if (c.zero_stage == 0) {
    // The replicas hold the same bits.
    for (Parameter* p : params) {
      Tensor first = p->grad.clone();
      world.broadcast(first, 0);
      EXPECT_EQ(first.to_vector(), p->grad.to_vector()) << p->name;
    }
    return;
  }
  // ZeRO: each rank's updated values reach every rank exactly.
  for (const ParameterSegment& s : reducer.owned_segments()) {
    const std::size_t i = static_cast<std::size_t>(
        std::find(params.begin(), params.end(), s.param) - params.begin());
    std::vector<float> v(static_cast<std::size_t>(s.numel()));
    for (std::int64_t e = s.begin; e < s.end; ++e)
      v[static_cast<std::size_t>(e - s.begin)] = static_cast<float>(1000 * i + e) + 0.125f;
    Tensor segment_value = s.value();
    segment_value.copy_from(Tensor::from_vector(v, {s.numel()}));
  }
  reducer.all_gather_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> got = params[i]->value.to_vector();
    for (std::int64_t e = 0; e < kNumels[i]; ++e)
      ASSERT_EQ(got[static_cast<std::size_t>(e)], static_cast<float>(1000 * i + e) + 0.125f)
          << params[i]->name << "[" << e << "]";
  }
}

class BucketReductionTest : public ::testing::TestWithParam<Case> {};

TEST_P(BucketReductionTest, ReducesAsSumsInDouble) {
  if (testing_mpi::world().size() != 8) GTEST_SKIP() << "needs 8 ranks";
  check(GetParam());
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* nodes : {"one", "2x4", "2x4 interleaved", "4x2"})
    for (WireType wire : {WireType::F32, WireType::BF16})
      for (int zero : {0, 1, 2}) cases.push_back({nodes, wire, zero});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, BucketReductionTest, ::testing::ValuesIn(all_cases()),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.nodes + (info.param.wire == WireType::BF16 ? "_bf16" : "_f32") +
                         "_zero" + std::to_string(info.param.zero_stage);
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

}  // namespace
}  // namespace ternion
