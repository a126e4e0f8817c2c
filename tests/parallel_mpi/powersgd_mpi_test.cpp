// PowerSGD through the gradient reducer on every rank of the job: with factors of full rank it
// is the exact sum; at rank 1 the error feedback loses nothing (what was applied so far plus
// every rank's residual is the sum of all gradients, step after step); and at GPT-2-like
// shapes it sends more than 10x fewer elements.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "mpi_gtest.h"
#include "kernels/elementwise.h"
#include "parallel/gradient_reducer.h"
#include "parallel/powersgd_reduction.h"

namespace ternion {
namespace {

double gradient(int rank, std::size_t param, std::int64_t element, int step) {
  return std::sin(0.3 + 0.71 * rank + 1.7 * static_cast<double>(param) +
                  0.013 * static_cast<double>(element) + 0.9 * step) +
         0.5 * std::cos(0.002 * static_cast<double>(element * element) + rank);  // full rank
}

struct CompressedRun {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> params;
  PowerSgdReduction* powersgd = nullptr;
  std::unique_ptr<GradientReducer> reducer;

  CompressedRun(const std::vector<Shape>& shapes, int rank, double min_rate,
                std::int64_t start = 0) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      owned.push_back(std::make_unique<Parameter>());
      owned.back()->name = "p" + std::to_string(i);
      owned.back()->value = Tensor::zeros(shapes[i]);
      owned.back()->grad = Tensor::zeros(shapes[i]);
      params.push_back(owned.back().get());
    }
    auto reduction =
        std::make_unique<PowerSgdReduction>(testing_mpi::world(), rank, 7, start, min_rate);
    powersgd = reduction.get();
    reducer = std::make_unique<GradientReducer>(params, std::vector<bool>(params.size(), false),
                                                std::move(reduction), 4 * 300, 0);
  }
  // One step of this rank's gradients; returns each parameter's reduced gradient. On rank
  // `spike_rank`, every gradient holds an infinity (a loss spike), so every bucket sees it.
  std::vector<std::vector<float>> step(int step_index, int spike_rank = -1) {
    const int rank = testing_mpi::world().rank();
    reducer->begin_step();
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i]->grad.zero();
      std::vector<float> g(static_cast<std::size_t>(params[i]->grad.numel()));
      for (std::size_t e = 0; e < g.size(); ++e)
        g[e] = static_cast<float>(gradient(rank, i, static_cast<std::int64_t>(e), step_index));
      if (rank == spike_rank) g[3] = std::numeric_limits<float>::infinity();
      params[i]->grad.view({-1}).copy_from(
          Tensor::from_vector(g, {static_cast<std::int64_t>(g.size())}));
      reducer->mark_ready({params[i]});
    }
    reducer->finish([] {});
    std::vector<std::vector<float>> out;
    for (Parameter* p : params) out.push_back(p->grad.to_vector());
    return out;
  }
  double sum_of_gradients(std::size_t param, std::size_t element, int steps) const {
    double sum = 0;
    for (int r = 0; r < testing_mpi::world().size(); ++r)
      for (int t = 0; t < steps; ++t)
        sum += gradient(r, param, static_cast<std::int64_t>(element), t);
    return sum;
  }
};

TEST(PowerSgd, FactorsOfFullRankGiveTheExactSum) {
  CompressedRun run({{12, 6}, {5}, {6, 9}}, /*rank=*/6, /*min_rate=*/0);
  EXPECT_NE(run.powersgd->describe().find("PowerSGD of rank 6"), std::string::npos);
  const auto got = run.step(0);
  for (std::size_t i = 0; i < got.size(); ++i)
    for (std::size_t e = 0; e < got[i].size(); ++e)
      ASSERT_NEAR(got[i][e], run.sum_of_gradients(i, e, 1), 2e-4 * testing_mpi::world().size())
          << "p" << i << "[" << e << "]";
  EXPECT_EQ(run.powersgd->residuals().size(), 2u);  // both matrices went compressed
}

TEST(PowerSgd, ErrorFeedbackLosesNothing) {
  CompressedRun run({{16, 12}, {7}, {10, 20}}, /*rank=*/1, /*min_rate=*/0);
  std::vector<std::vector<double>> applied;
  Communicator& world = testing_mpi::world();
  double largest_residual = 0;
  for (int t = 0; t < 4; ++t) {
    const auto got = run.step(t);
    applied.resize(got.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      applied[i].resize(got[i].size());
      for (std::size_t e = 0; e < got[i].size(); ++e) applied[i][e] += got[i][e];
    }
    // Every rank's residuals, summed: what the applied sums still lack.
    const std::vector<Tensor> residuals = run.powersgd->residuals();
    ASSERT_EQ(residuals.size(), 2u);
    std::size_t r = 0;
    for (std::size_t i : {std::size_t{0}, std::size_t{2}}) {
      Tensor lacking = residuals[r++].clone();
      world.all_reduce(lacking, ReduceOp::Sum);
      const std::vector<float> l = lacking.to_vector();
      for (std::size_t e = 0; e < l.size(); ++e) {
        largest_residual = std::max(largest_residual, std::abs(static_cast<double>(l[e])));
        ASSERT_NEAR(applied[i][e] + l[e], run.sum_of_gradients(i, e, t + 1), 1e-3)
            << "step " << t << ", p" << i << "[" << e << "]";
      }
    }
    for (std::size_t e = 0; e < applied[1].size(); ++e)  // the vector travels whole
      ASSERT_NEAR(applied[1][e], run.sum_of_gradients(1, e, t + 1), 1e-4);
  }
  EXPECT_GT(largest_residual, 0.1) << "rank 1 should not have been exact";
}

TEST(PowerSgd, TheStepsBeforeItsStartAreExactSums) {
  CompressedRun run({{16, 12}, {7}}, /*rank=*/1, /*min_rate=*/0, /*start=*/2);
  for (int t = 0; t < 3; ++t) {
    const auto got = run.step(t);
    double worst = 0;
    for (std::size_t e = 0; e < got[0].size(); ++e)
      worst = std::max(worst, std::abs(got[0][e] - (run.sum_of_gradients(0, e, t + 1) -
                                                    run.sum_of_gradients(0, e, t))));
    if (t < 2) {
      EXPECT_LT(worst, 1e-4) << "step " << t << " was compressed";
      EXPECT_TRUE(run.powersgd->residuals().empty());
    } else {
      EXPECT_GT(worst, 1e-2) << "step " << t << " was not compressed";
    }
  }
}

// A step whose gradients are not finite on one rank (the trainer skips it) hands back NaN for
// the compressed matrices and leaves the residuals and Q as they were: the steps after it
// reduce exactly as in a run that never had it.
TEST(PowerSgd, ASpikeLeavesTheStateAsItWas) {
  const std::vector<Shape> shapes = {{16, 12}, {7}, {10, 20}};
  CompressedRun plain(shapes, /*rank=*/2, /*min_rate=*/0);
  CompressedRun spiked(shapes, /*rank=*/2, /*min_rate=*/0);
  const int last = testing_mpi::world().size() - 1;
  EXPECT_EQ(plain.step(0), spiked.step(0));
  const auto spike = spiked.step(1, /*spike_rank=*/last);
  for (std::size_t i : {std::size_t{0}, std::size_t{2}})  // the compressed matrices
    for (float v : spike[i]) ASSERT_TRUE(std::isnan(v)) << "p" << i;
  EXPECT_FALSE(std::isfinite(spike[1][3]));  // the vector travels whole, its sum infinite
  for (int t = 1; t < 4; ++t) {
    EXPECT_EQ(plain.step(t), spiked.step(t)) << "step " << t;
    const std::vector<Tensor> a = plain.powersgd->residuals(), b = spiked.powersgd->residuals();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].to_vector(), b[i].to_vector());
  }
  const auto state_of = [](PowerSgdReduction& r) {
    std::vector<std::vector<float>> out;
    for (const auto& [name, tensor] : r.state(Device::cpu())) out.push_back(tensor.to_vector());
    return out;
  };
  EXPECT_EQ(state_of(*plain.powersgd), state_of(*spiked.powersgd));
}

TEST(PowerSgd, SendsTenTimesFewerElementsAtGptShapes) {
  // A GPT-2 block's matrices at a quarter of its width, with its vectors.
  CompressedRun run({{576, 192}, {576}, {192, 192}, {192}, {768, 192}, {768}, {192, 768}, {192}}, 4,
                    2.0);
  run.step(0);
  EXPECT_LE(run.powersgd->wire_elements() * 10, run.powersgd->bucket_elements())
      << run.powersgd->describe();
}

}  // namespace
}  // namespace ternion
