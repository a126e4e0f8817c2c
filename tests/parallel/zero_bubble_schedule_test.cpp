// The ZB-H1 schedule (parallel/pipeline_schedule.h) against the rules it is built on, for
// every (stages 2..8, micro-batches p..3p+1): every rank runs each micro-batch's F, B and W
// once, in dependency order, with W in micro-batch order and the gradient sent right after B;
// no deadlock; at most min(p, m) micro-batches held from F to W on any rank (1F1B's bound);
// with equal F, B and W the idle time of the paper's formula, (p - 1)(F + B - W) per rank.
// A literal list pins 4 stages x 8 micro-batches, and the refusals name their keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "framework/error.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_simulator.h"

namespace ternion {
namespace {

using Kind = PipelineAction::Kind;
using ActionList = std::vector<PipelineAction>;
constexpr PipelineSchedule kZb = PipelineSchedule::ZeroBubbleH1;

std::string label(int p, int m, int s = -1) {
  return "zb-h1 p=" + std::to_string(p) + " m=" + std::to_string(m) +
         (s >= 0 ? " stage " + std::to_string(s) : "");
}

struct Shape {
  int p, m;
};
std::vector<Shape> all_shapes() {
  std::vector<Shape> shapes;
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 3 * p + 1; ++m) shapes.push_back({p, m});
  return shapes;
}

int index_of(const ActionList& list, Kind kind, int m) {
  const auto it = std::find(list.begin(), list.end(), PipelineAction{kind, m, 0});
  return it == list.end() ? -1 : static_cast<int>(it - list.begin());
}

TEST(ZeroBubbleSchedule, EachMicroBatchRunsFThenBThenWOnce) {
  for (const Shape& c : all_shapes()) {
    for (int s = 0; s < c.p; ++s) {
      const ActionList list = pipeline_schedule(kZb, c.p, c.m, 1, s);
      const std::string what = label(c.p, c.m, s);
      int computes = 0, last_w = -1;
      for (const PipelineAction& a : list) {
        ASSERT_NE(a.kind, Kind::Backward) << what << ": a whole backward in a split schedule";
        ASSERT_EQ(a.chunk, 0) << what;
        if (is_compute(a.kind)) ++computes;
        if (a.kind == Kind::BackwardWeight) {
          EXPECT_EQ(a.micro_batch, last_w + 1) << what << ": W out of micro-batch order";
          last_w = a.micro_batch;
        }
      }
      EXPECT_EQ(computes, 3 * c.m) << what;
      for (int m = 0; m < c.m; ++m) {
        const int f = index_of(list, Kind::Forward, m), b = index_of(list, Kind::BackwardInput, m),
                  w = index_of(list, Kind::BackwardWeight, m);
        ASSERT_TRUE(f >= 0 && f < b && b < w) << what << " m=" << m << ": F " << f << " B " << b
                                              << " W " << w;
        // The previous stage waits for B's gradient: it is sent at once, before W.
        if (s > 0) {
          EXPECT_EQ(list[static_cast<std::size_t>(b + 1)],
                    (PipelineAction{Kind::SendGradient, m, 0}))
              << what;
        }
        if (s + 1 < c.p) {
          EXPECT_EQ(list[static_cast<std::size_t>(b - 1)],
                    (PipelineAction{Kind::RecvGradient, m, 0}))
              << what;
        }
      }
    }
  }
}

TEST(ZeroBubbleSchedule, NeverDeadlocksAndHoldsNoMoreThanOneFOneB) {
  for (const Shape& c : all_shapes()) {
    const PipelineSimulation zb = simulate_pipeline(kZb, c.p, c.m, 1);
    const PipelineSimulation one = simulate_pipeline(PipelineSchedule::OneFOneB, c.p, c.m, 1);
    ASSERT_FALSE(zb.deadlocked) << label(c.p, c.m) << ": " << zb.deadlock;
    const int bound = *std::max_element(one.peak_activations.begin(), one.peak_activations.end());
    EXPECT_EQ(bound, std::min(c.p, c.m)) << label(c.p, c.m);
    for (int s = 0; s < c.p; ++s)
      EXPECT_LE(zb.peak_activations[static_cast<std::size_t>(s)], bound) << label(c.p, c.m, s);
  }
}

TEST(ZeroBubbleSchedule, IdleTimeIsThePapersFormula) {
  // Qi et al. 2024: with T_F = T_B = T_W each rank idles (p - 1)(T_F + T_B - T_W), against
  // 1F1B's (p - 1)(T_F + T_B + T_W).
  for (const Shape& c : all_shapes()) {
    for (const double t : {1.0, 0.25}) {
      const PipelineSimulation zb = simulate_pipeline(kZb, c.p, c.m, 1, t, 2 * t, 0.5);
      const PipelineSimulation one =
          simulate_pipeline(PipelineSchedule::OneFOneB, c.p, c.m, 1, t, 2 * t, 0.5);
      for (int s = 0; s < c.p; ++s) {
        EXPECT_NEAR(zb.idle_time[static_cast<std::size_t>(s)], (c.p - 1) * t, 1e-9)
            << label(c.p, c.m, s);
        EXPECT_NEAR(one.idle_time[static_cast<std::size_t>(s)], 3 * (c.p - 1) * t, 1e-9)
            << label(c.p, c.m, s);
      }
      // The least any one-chunk schedule can take: the last stage starts after p - 1 forwards.
      EXPECT_NEAR(zb.makespan, (3 * c.m + c.p - 1) * t, 1e-9) << label(c.p, c.m);
    }
  }
}

TEST(ZeroBubbleSchedule, BeatsOneFOneBWhateverTheWeightShare) {
  // The W that fill the cool-down shorten the step for any split of the backward; with no W
  // at all (share 0) it is 1F1B.
  for (const Shape& c : all_shapes())
    for (const double share : {0.0, 0.3, 0.5, 0.7}) {
      const double zb = simulate_pipeline(kZb, c.p, c.m, 1, 1.0, 2.0, share).makespan;
      const double one = simulate_pipeline(PipelineSchedule::OneFOneB, c.p, c.m, 1).makespan;
      EXPECT_LE(zb, one + 1e-9) << label(c.p, c.m) << " share " << share;
      if (share > 0) {
        EXPECT_LT(zb, one) << label(c.p, c.m) << " share " << share;
      }
    }
}

TEST(ZeroBubbleSchedule, FourStagesEightMicroBatches) {
  auto F = [](int m) { return PipelineAction{Kind::Forward, m, 0}; };
  auto B = [](int m) { return PipelineAction{Kind::BackwardInput, m, 0}; };
  auto W = [](int m) { return PipelineAction{Kind::BackwardWeight, m, 0}; };
  auto SA = [](int m) { return PipelineAction{Kind::SendActivation, m, 0}; };
  auto RA = [](int m) { return PipelineAction{Kind::RecvActivation, m, 0}; };
  auto SG = [](int m) { return PipelineAction{Kind::SendGradient, m, 0}; };
  auto RG = [](int m) { return PipelineAction{Kind::RecvGradient, m, 0}; };
  // Stage 0: 1F1B's three warm-up forwards, then F B W steps, the W right after its B.
  EXPECT_EQ(pipeline_schedule(kZb, 4, 8, 1, 0),
            (ActionList{F(0), SA(0), F(1), SA(1), F(2), SA(2),                         //
                        F(3), SA(3), RG(0), B(0), W(0), F(4), SA(4), RG(1), B(1), W(1),  //
                        F(5), SA(5), RG(2), B(2), W(2), F(6), SA(6), RG(3), B(3), W(3),  //
                        F(7), SA(7), RG(4), B(4), W(4),                                  //
                        RG(5), B(5), W(5), RG(6), B(6), W(6), RG(7), B(7), W(7)}));
  // Stage 3, the last: no warm-up; its first three W wait, and fill the end.
  EXPECT_EQ(pipeline_schedule(kZb, 4, 8, 1, 3),
            (ActionList{RA(0), F(0), B(0), SG(0), RA(1), F(1), B(1), SG(1),          //
                        RA(2), F(2), B(2), SG(2), RA(3), F(3), B(3), SG(3), W(0),    //
                        RA(4), F(4), B(4), SG(4), W(1), RA(5), F(5), B(5), SG(5), W(2),  //
                        RA(6), F(6), B(6), SG(6), W(3), RA(7), F(7), B(7), SG(7), W(4),  //
                        W(5), W(6), W(7)}));
}

TEST(ZeroBubbleSchedule, OneStageIsForwardThenSplitBackward) {
  EXPECT_EQ(pipeline_schedule(kZb, 1, 2, 1, 0),
            (ActionList{{Kind::Forward, 0, 0}, {Kind::BackwardInput, 0, 0},
                        {Kind::BackwardWeight, 0, 0}, {Kind::Forward, 1, 0},
                        {Kind::BackwardInput, 1, 0}, {Kind::BackwardWeight, 1, 0}}));
}

TEST(ZeroBubbleSchedule, RefusesTooFewMicroBatchesAndVirtualStages) {
  try {
    pipeline_schedule(kZb, 4, 3, 1, 0);
    ADD_FAILURE() << "3 micro-batches on 4 stages accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("the zb-h1 schedule needs at least as many "
                                          "micro-batches as pipeline stages (4)", 0), 0u)
        << e.what();
  }
  try {
    pipeline_schedule(kZb, 4, 8, 2, 0);
    ADD_FAILURE() << "two virtual stages accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("parallel.virtual_stages (2) needs the interleaved "
                                          "pipeline schedule; the zb-h1 schedule", 0), 0u)
        << e.what();
  }
}

TEST(ZeroBubbleSchedule, SimulatorRefusesWBeforeB) {
  const ActionList list{{Kind::Forward, 0, 0}, {Kind::BackwardWeight, 0, 0}};
  EXPECT_THROW(simulate_pipeline_actions({list}, 1), InternalError);
  const ActionList twice{
      {Kind::Forward, 0, 0}, {Kind::BackwardInput, 0, 0}, {Kind::Backward, 0, 0}};
  EXPECT_THROW(simulate_pipeline_actions({twice}, 1), InternalError);
}

}  // namespace
}  // namespace ternion
