// pipeline_schedule and simulate_pipeline against references written here: every valid
// (schedule, stages 1..6, micro-batches 1..12, chunks 1..3) is checked for complete and
// well-placed compute, one receive per send on the right peer (virtual stage c * p + s
// recomputed here), no deadlock, the closed-form bubble and activation peaks, and Megatron's
// warm-up count; literal lists pin 1F1B (4 stages, 8 micro-batches) and interleaving (2 x 2,
// 4 micro-batches); lists changed by hand show that the simulator catches deadlocks.
#include "parallel/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "framework/error.h"
#include "parallel/pipeline_simulator.h"

namespace ternion {
namespace {

using Kind = PipelineAction::Kind;
using ActionList = std::vector<PipelineAction>;

struct Config {
  PipelineSchedule kind;
  int stages, micro_batches, virtual_stages;
};

std::string label(const Config& c) {
  return std::string(pipeline_schedule_name(c.kind)) + " p=" + std::to_string(c.stages) +
         " m=" + std::to_string(c.micro_batches) + " v=" + std::to_string(c.virtual_stages);
}

// The documented rules, restated: which configurations a schedule accepts.
bool is_valid(PipelineSchedule kind, int p, int m, int v) {
  if (p < 1 || m < 1 || v < 1) return false;
  if (kind != PipelineSchedule::Interleaved) return v == 1;
  return (p > 1 || v == 1) && m % p == 0;
}

const PipelineSchedule kSchedules[] = {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB,
                                       PipelineSchedule::Interleaved};

std::vector<Config> all_configs() {
  std::vector<Config> configs;
  for (PipelineSchedule kind : kSchedules)
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 12; ++m)
        for (int v = 1; v <= 3; ++v)
          if (is_valid(kind, p, m, v)) configs.push_back({kind, p, m, v});
  return configs;
}

std::vector<ActionList> all_lists(const Config& c) {
  std::vector<ActionList> lists;
  for (int s = 0; s < c.stages; ++s)
    lists.push_back(pipeline_schedule(c.kind, c.stages, c.micro_batches, c.virtual_stages, s));
  return lists;
}

// Megatron-LM's warm-up forward count, from its two schedule functions.
int megatron_warmup(const Config& c, int s) {
  const int p = c.stages, m = c.micro_batches, v = c.virtual_stages;
  switch (c.kind) {
    case PipelineSchedule::GPipe: return m;
    case PipelineSchedule::OneFOneB:
    case PipelineSchedule::ZeroBubbleH1: return std::min(p - s - 1, m);
    case PipelineSchedule::Interleaved:
      if (m == p) return m * v;  // all_warmup_microbatches
      return std::min((p - s - 1) * 2 + (v - 1) * p, m * v);
  }
  return -1;
}

// Compares got with want; on failure prints the label, absolute difference and relative error.
void expect_close(const std::string& what, double got, double want, double tolerance) {
  const double diff = std::fabs(got - want);
  const double rel = want != 0 ? diff / std::fabs(want) : diff;
  EXPECT_LE(diff, tolerance) << what << ": got " << got << " want " << want << " (abs diff "
                             << diff << ", rel err " << rel << ")";
}

std::string config_error(PipelineSchedule kind, int p, int m, int v) {
  try {
    validate_pipeline_schedule(kind, p, m, v);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Short names for the literal lists.
PipelineAction F(int m, int c = 0) { return {Kind::Forward, m, c}; }
PipelineAction B(int m, int c = 0) { return {Kind::Backward, m, c}; }
PipelineAction RA(int m, int c = 0) { return {Kind::RecvActivation, m, c}; }
PipelineAction SA(int m, int c = 0) { return {Kind::SendActivation, m, c}; }
PipelineAction RG(int m, int c = 0) { return {Kind::RecvGradient, m, c}; }
PipelineAction SG(int m, int c = 0) { return {Kind::SendGradient, m, c}; }

void expect_list(const ActionList& got, const ActionList& want, const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    EXPECT_EQ(got[i], want[i]) << what << ": action " << i;
}

TEST(PipelineSchedule, EnumeratesEnoughConfigurations) {
  // 72 GPipe, 72 1F1B, 12 + 3 x 17 interleaved.
  EXPECT_EQ(all_configs().size(), 72u + 72u + 63u);
}

TEST(PipelineSchedule, EveryPairIsForwardedOnceThenBackwardedOnce) {
  for (const Config& c : all_configs()) {
    const std::vector<ActionList> lists = all_lists(c);
    for (int s = 0; s < c.stages; ++s) {
      std::map<std::pair<int, int>, std::vector<int>> forwards, backwards;  // pair -> indices
      const ActionList& list = lists[s];
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        const PipelineAction& a = list[i];
        ASSERT_TRUE(a.micro_batch >= 0 && a.micro_batch < c.micro_batches && a.chunk >= 0 &&
                    a.chunk < c.virtual_stages)
            << label(c) << " stage " << s << ": " << a;
        if (a.kind == Kind::Forward) forwards[{a.micro_batch, a.chunk}].push_back(i);
        if (a.kind == Kind::Backward) backwards[{a.micro_batch, a.chunk}].push_back(i);
      }
      const std::size_t pairs = static_cast<std::size_t>(c.micro_batches * c.virtual_stages);
      EXPECT_EQ(forwards.size(), pairs) << label(c) << " stage " << s;
      EXPECT_EQ(backwards.size(), pairs) << label(c) << " stage " << s;
      for (const auto& [pair, at] : forwards) {
        const std::string what = label(c) + " stage " + std::to_string(s) +
                                 " m=" + std::to_string(pair.first) +
                                 " chunk=" + std::to_string(pair.second);
        ASSERT_EQ(at.size(), 1u) << what << " forwarded " << at.size() << " times";
        ASSERT_EQ(backwards[pair].size(), 1u) << what << " backwarded " << backwards[pair].size()
                                              << " times";
        EXPECT_LT(at[0], backwards[pair][0]) << what << ": backward before forward";
      }
    }
  }
}

// Each compute has its receive before it and its send after it, exactly where the virtual
// stage says, and the list holds nothing else.
TEST(PipelineSchedule, EachComputeCarriesItsCommunication) {
  for (const Config& c : all_configs()) {
    const int last = c.stages * c.virtual_stages - 1;
    const std::vector<ActionList> lists = all_lists(c);
    for (int s = 0; s < c.stages; ++s) {
      const ActionList& list = lists[s];
      auto indices_of = [&](Kind kind, int m, int chunk) {
        std::vector<int> at;
        for (int i = 0; i < static_cast<int>(list.size()); ++i)
          if (list[i] == PipelineAction{kind, m, chunk}) at.push_back(i);
        return at;
      };
      std::size_t expected_size = 0;
      for (int m = 0; m < c.micro_batches; ++m)
        for (int chunk = 0; chunk < c.virtual_stages; ++chunk) {
          const int u = chunk * c.stages + s;
          const std::string what = label(c) + " stage " + std::to_string(s) + " m=" +
                                   std::to_string(m) + " chunk=" + std::to_string(chunk);
          const int forward = indices_of(Kind::Forward, m, chunk).at(0);
          const int backward = indices_of(Kind::Backward, m, chunk).at(0);
          const std::vector<int> ra = indices_of(Kind::RecvActivation, m, chunk);
          const std::vector<int> sa = indices_of(Kind::SendActivation, m, chunk);
          const std::vector<int> rg = indices_of(Kind::RecvGradient, m, chunk);
          const std::vector<int> sg = indices_of(Kind::SendGradient, m, chunk);
          EXPECT_EQ(ra.size(), u > 0 ? 1u : 0u) << what << " RecvActivation";
          EXPECT_EQ(sa.size(), u < last ? 1u : 0u) << what << " SendActivation";
          EXPECT_EQ(rg.size(), u < last ? 1u : 0u) << what << " RecvGradient";
          EXPECT_EQ(sg.size(), u > 0 ? 1u : 0u) << what << " SendGradient";
          if (ra.size() == 1) {
            EXPECT_LT(ra[0], forward) << what;
          }
          if (sa.size() == 1) {
            EXPECT_GT(sa[0], forward) << what;
          }
          if (rg.size() == 1) {
            EXPECT_LT(rg[0], backward) << what;
          }
          if (sg.size() == 1) {
            EXPECT_GT(sg[0], backward) << what;
          }
          expected_size += 2 + ra.size() + sa.size() + rg.size() + sg.size();
        }
      EXPECT_EQ(list.size(), expected_size) << label(c) << " stage " << s << ": stray actions";
    }
  }
}

TEST(PipelineSchedule, EverySendHasOneMatchingRecvOnThePeer) {
  for (const Config& c : all_configs()) {
    // (is a gradient, micro-batch, from virtual stage, to virtual stage) -> sends, receives
    std::map<std::tuple<bool, int, int, int>, std::pair<int, int>> messages;
    const std::vector<ActionList> lists = all_lists(c);
    for (int s = 0; s < c.stages; ++s)
      for (const PipelineAction& a : lists[s]) {
        if (is_compute(a.kind)) continue;
        const int u = a.chunk * c.stages + s;
        const bool gradient = a.kind == Kind::SendGradient || a.kind == Kind::RecvGradient;
        // Activations go u -> u + 1, gradients u -> u - 1.
        const int step = gradient ? -1 : 1;
        const bool send = is_send(a.kind);
        const int from = send ? u : u - step, to = send ? u + step : u;
        auto& [sends, recvs] = messages[{gradient, a.micro_batch, from, to}];
        (send ? sends : recvs) += 1;
        const PipelinePeer peer = pipeline_peer(a, c.stages, c.virtual_stages, s);
        const int other = send ? to : from;
        EXPECT_EQ(peer.stage, other % c.stages) << label(c) << " stage " << s << ": " << a;
        EXPECT_EQ(peer.chunk, other / c.stages) << label(c) << " stage " << s << ": " << a;
      }
    const int virtual_stages = c.stages * c.virtual_stages;
    // Each of M micro-batches crosses every boundary once each way.
    EXPECT_EQ(messages.size(), static_cast<std::size_t>(2 * c.micro_batches * (virtual_stages - 1)))
        << label(c);
    for (const auto& [key, count] : messages) {
      const auto& [gradient, m, from, to] = key;
      EXPECT_TRUE(from >= 0 && from < virtual_stages && to >= 0 && to < virtual_stages)
          << label(c) << ": message " << from << " -> " << to;
      EXPECT_EQ(count, std::make_pair(1, 1))
          << label(c) << (gradient ? " gradient" : " activation") << " m=" << m << " virtual "
          << from << " -> " << to << ": " << count.first << " sends, " << count.second
          << " receives";
    }
  }
}

TEST(PipelineSchedule, WarmupMatchesMegatron) {
  // The forwards before the first backward: the warm-up, plus the first steady-state forward
  // when there is a steady state.
  for (const Config& c : all_configs()) {
    const std::vector<ActionList> lists = all_lists(c);
    for (int s = 0; s < c.stages; ++s) {
      int forwards = 0;
      for (const PipelineAction& a : lists[s]) {
        if (a.kind == Kind::Backward) break;
        forwards += a.kind == Kind::Forward;
      }
      const int total = c.micro_batches * c.virtual_stages;
      EXPECT_EQ(forwards, std::min(megatron_warmup(c, s) + 1, total))
          << label(c) << " stage " << s;
    }
  }
  // The formula by hand for 4 stages, 8 micro-batches, 2 chunks: (4 - s - 1) * 2 + 4.
  const Config c{PipelineSchedule::Interleaved, 4, 8, 2};
  EXPECT_EQ(megatron_warmup(c, 0), 10);
  EXPECT_EQ(megatron_warmup(c, 3), 4);
}

TEST(PipelineSimulator, NoConfigurationDeadlocks) {
  for (const Config& c : all_configs()) {
    const PipelineSimulation sim =
        simulate_pipeline(c.kind, c.stages, c.micro_batches, c.virtual_stages);
    EXPECT_FALSE(sim.deadlocked) << label(c) << ": " << sim.deadlock;
    EXPECT_EQ(sim.blocked_at, std::vector<int>(c.stages, -1)) << label(c);
    const std::vector<ActionList> lists = all_lists(c);
    for (int s = 0; s < c.stages; ++s) {
      ASSERT_EQ(sim.spans[s].size(), lists[s].size()) << label(c) << " stage " << s;
      double previous_end = 0;
      for (std::size_t i = 0; i < lists[s].size(); ++i) {
        const PipelineSpan& span = sim.spans[s][i];
        EXPECT_EQ(span.action, lists[s][i]) << label(c) << " stage " << s;
        EXPECT_GE(span.start, previous_end) << label(c) << " stage " << s << " action " << i;
        previous_end = span.end;
      }
      // Every micro-batch's forward and backward, 1 + 2 in all, spread over the chunks.
      expect_close(label(c) + " busy time, stage " + std::to_string(s), sim.busy_time[s],
                   3.0 * c.micro_batches, 1e-12);
    }
  }
}

TEST(PipelineSimulator, BubbleMatchesTheClosedForms) {
  for (const Config& c : all_configs()) {
    const double p = c.stages, m = c.micro_batches, v = c.virtual_stages;
    // GPipe and 1F1B: (p - 1) / (m + p - 1); interleaving divides the warm-up by v.
    const double fill = (p - 1) / v;
    for (double backward_cost : {2.0, 1.0}) {
      const PipelineSimulation sim =
          simulate_pipeline(c.kind, c.stages, c.micro_batches, c.virtual_stages, 1.0,
                            backward_cost);
      const std::string what = label(c) + " backward cost " + std::to_string(backward_cost);
      expect_close(what + " bubble", sim.bubble_fraction, fill / (m + fill), 1e-12);
      expect_close(what + " makespan", sim.makespan, (m + fill) * (1 + backward_cost), 1e-12);
    }
  }
}

TEST(PipelineSimulator, ActivationPeaks) {
  for (const Config& c : all_configs()) {
    const PipelineSimulation sim =
        simulate_pipeline(c.kind, c.stages, c.micro_batches, c.virtual_stages);
    for (int s = 0; s < c.stages; ++s) {
      const int peak = sim.peak_activations[s];
      const std::string what = label(c) + " stage " + std::to_string(s);
      switch (c.kind) {
        case PipelineSchedule::GPipe:
          EXPECT_EQ(peak, c.micro_batches) << what;
          break;
        case PipelineSchedule::OneFOneB:
          EXPECT_LE(peak, c.stages - s) << what;
          EXPECT_EQ(peak, std::min(c.stages - s, c.micro_batches)) << what;
          break;
        case PipelineSchedule::Interleaved:
          // The warm-up's forwards plus the first steady-state one.
          EXPECT_EQ(peak, std::min(megatron_warmup(c, s) + 1, c.micro_batches * c.virtual_stages))
              << what;
          break;
        case PipelineSchedule::ZeroBubbleH1:  // zero_bubble_schedule_test.cpp
          ADD_FAILURE() << what << " is not enumerated here";
          break;
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBFourStagesEightMicroBatches) {
  const ActionList stage0 = pipeline_schedule(PipelineSchedule::OneFOneB, 4, 8, 1, 0);
  const ActionList stage3 = pipeline_schedule(PipelineSchedule::OneFOneB, 4, 8, 1, 3);
  // Stage 0: three warm-up forwards, five 1F1B steps, three cool-down backwards.
  expect_list(stage0,
              {F(0), SA(0), F(1), SA(1), F(2), SA(2),                        //
               F(3), SA(3), RG(0), B(0), F(4), SA(4), RG(1), B(1),           //
               F(5), SA(5), RG(2), B(2), F(6), SA(6), RG(3), B(3),           //
               F(7), SA(7), RG(4), B(4),                                     //
               RG(5), B(5), RG(6), B(6), RG(7), B(7)},
              "1f1b p=4 m=8 stage 0");
  // The last stage: no warm-up, each backward right after its forward.
  expect_list(stage3,
              {RA(0), F(0), B(0), SG(0), RA(1), F(1), B(1), SG(1),  //
               RA(2), F(2), B(2), SG(2), RA(3), F(3), B(3), SG(3),  //
               RA(4), F(4), B(4), SG(4), RA(5), F(5), B(5), SG(5),  //
               RA(6), F(6), B(6), SG(6), RA(7), F(7), B(7), SG(7)},
              "1f1b p=4 m=8 stage 3");
}

TEST(PipelineSchedule, InterleavedTwoStagesTwoChunksFourMicroBatches) {
  // Virtual stages: rank 0 holds 0 (chunk 0) and 2 (chunk 1), rank 1 holds 1 and 3 (the loss).
  // Forward order (m, chunk): (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1); backward order
  // (0,1) (1,1) (0,0) (1,0) (2,1) (3,1) (2,0) (3,0). Warm-up 4 on rank 0, 2 on rank 1.
  expect_list(pipeline_schedule(PipelineSchedule::Interleaved, 2, 4, 2, 0),
              {F(0, 0), SA(0, 0), F(1, 0), SA(1, 0),                                  //
               RA(0, 1), F(0, 1), SA(0, 1), RA(1, 1), F(1, 1), SA(1, 1),              //
               F(2, 0), SA(2, 0), RG(0, 1), B(0, 1), SG(0, 1),                        //
               F(3, 0), SA(3, 0), RG(1, 1), B(1, 1), SG(1, 1),                        //
               RA(2, 1), F(2, 1), SA(2, 1), RG(0, 0), B(0, 0),                        //
               RA(3, 1), F(3, 1), SA(3, 1), RG(1, 0), B(1, 0),                        //
               RG(2, 1), B(2, 1), SG(2, 1), RG(3, 1), B(3, 1), SG(3, 1),              //
               RG(2, 0), B(2, 0), RG(3, 0), B(3, 0)},
              "interleaved p=2 m=4 v=2 stage 0");
  expect_list(pipeline_schedule(PipelineSchedule::Interleaved, 2, 4, 2, 1),
              {RA(0, 0), F(0, 0), SA(0, 0), RA(1, 0), F(1, 0), SA(1, 0),              //
               RA(0, 1), F(0, 1), B(0, 1), SG(0, 1),                                  //
               RA(1, 1), F(1, 1), B(1, 1), SG(1, 1),                                  //
               RA(2, 0), F(2, 0), SA(2, 0), RG(0, 0), B(0, 0), SG(0, 0),              //
               RA(3, 0), F(3, 0), SA(3, 0), RG(1, 0), B(1, 0), SG(1, 0),              //
               RA(2, 1), F(2, 1), B(2, 1), SG(2, 1),                                  //
               RA(3, 1), F(3, 1), B(3, 1), SG(3, 1),                                  //
               RG(2, 0), B(2, 0), SG(2, 0), RG(3, 0), B(3, 0), SG(3, 0)},
              "interleaved p=2 m=4 v=2 stage 1");
}

TEST(PipelineSchedule, GPipeRunsBackwardsInForwardOrder) {
  expect_list(pipeline_schedule(PipelineSchedule::GPipe, 3, 3, 1, 1),
              {RA(0), F(0), SA(0), RA(1), F(1), SA(1), RA(2), F(2), SA(2),  //
               RG(0), B(0), SG(0), RG(1), B(1), SG(1), RG(2), B(2), SG(2)},
              "gpipe p=3 m=3 stage 1");
}

TEST(PipelineSimulator, TimelineOfTwoStages) {
  // 1F1B on 2 stages, 2 micro-batches, forward 1 and backward 2.
  const PipelineSimulation sim = simulate_pipeline(PipelineSchedule::OneFOneB, 2, 2, 1);
  struct Expected {
    PipelineAction action;
    double start, end;
  };
  const std::vector<std::vector<Expected>> want = {
      {{F(0), 0, 1}, {SA(0), 1, 1}, {F(1), 1, 2}, {SA(1), 2, 2}, {RG(0), 2, 4}, {B(0), 4, 6},
       {RG(1), 6, 7}, {B(1), 7, 9}},
      {{RA(0), 0, 1}, {F(0), 1, 2}, {B(0), 2, 4}, {SG(0), 4, 4}, {RA(1), 4, 4}, {F(1), 4, 5},
       {B(1), 5, 7}, {SG(1), 7, 7}}};
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(sim.spans[s].size(), want[s].size()) << "stage " << s;
    for (std::size_t i = 0; i < want[s].size(); ++i) {
      const std::string what = "stage " + std::to_string(s) + " " +
                               pipeline_action_str(want[s][i].action);
      EXPECT_EQ(sim.spans[s][i].action, want[s][i].action) << what;
      expect_close(what + " start", sim.spans[s][i].start, want[s][i].start, 0);
      expect_close(what + " end", sim.spans[s][i].end, want[s][i].end, 0);
    }
  }
  expect_close("makespan", sim.makespan, 9, 0);
  expect_close("idle stage 0", sim.idle_time[0], 3, 0);
  expect_close("idle stage 1", sim.idle_time[1], 3, 0);
  expect_close("bubble", sim.bubble_fraction, 1.0 / 3.0, 1e-15);
}

std::vector<ActionList> one_f_one_b_lists(int stages, int micro_batches) {
  return all_lists({PipelineSchedule::OneFOneB, stages, micro_batches, 1});
}

TEST(PipelineSimulator, ReportsTheDeadlockOfASwappedSendAndRecv) {
  std::vector<ActionList> lists = one_f_one_b_lists(4, 8);
  ASSERT_FALSE(simulate_pipeline_actions(lists, 1).deadlocked);
  // Stage 0 now waits for micro-batch 0's gradient before it sends micro-batch 0's activation,
  // which that gradient depends on.
  ActionList& stage0 = lists[0];
  ASSERT_EQ(stage0[1], SA(0));
  ASSERT_EQ(stage0[8], RG(0));
  std::swap(stage0[1], stage0[8]);
  const PipelineSimulation sim = simulate_pipeline_actions(lists, 1);
  EXPECT_TRUE(sim.deadlocked);
  EXPECT_EQ(sim.blocked_at, (std::vector<int>{1, 0, 0, 0}));
  EXPECT_NE(sim.deadlock.find("stage 0 blocks at action 1 of 32, RecvGradient(m=0, chunk=0) from "
                              "stage 1 chunk 0, which blocks at action 0 of 48"),
            std::string::npos)
      << sim.deadlock;
  EXPECT_NE(sim.deadlock.find("stage 1 blocks at action 0 of 48, RecvActivation(m=0, chunk=0) "
                              "from stage 0 chunk 0, which blocks at action 1 of 32"),
            std::string::npos)
      << sim.deadlock;
  // What ran is on the timeline: stage 0's first forward only.
  ASSERT_EQ(sim.spans[0].size(), 1u);
  EXPECT_EQ(sim.spans[0][0].action, F(0));
  EXPECT_TRUE(sim.spans[1].empty());
}

TEST(PipelineSimulator, ReportsTheDeadlockOfTooShortAWarmup) {
  // Stage 1 of 1F1B on 4 stages given the last stage's order (no warm-up): its first backward
  // waits for stage 2's, which comes after stage 2's second forward, which needs stage 1's
  // second forward, which comes after that backward.
  std::vector<ActionList> lists = one_f_one_b_lists(4, 8);
  ActionList& stage1 = lists[1];
  stage1.clear();
  for (int m = 0; m < 8; ++m)
    for (const PipelineAction& a : {RA(m), F(m), SA(m), RG(m), B(m), SG(m)}) stage1.push_back(a);
  const PipelineSimulation sim = simulate_pipeline_actions(lists, 1);
  EXPECT_TRUE(sim.deadlocked);
  EXPECT_EQ(sim.blocked_at[1], 3) << sim.deadlock;  // RecvGradient(m=0)
  EXPECT_EQ(sim.blocked_at[2], 3) << sim.deadlock;  // RecvActivation(m=1)
  EXPECT_NE(sim.deadlock.find("stage 1 blocks at action 3 of 48, RecvGradient(m=0, chunk=0) from "
                              "stage 2 chunk 0, which blocks at action 3 of 48"),
            std::string::npos)
      << sim.deadlock;
}

TEST(PipelineSimulator, ReportsADroppedSend) {
  // Stage 1 never sends micro-batch 7's gradient: it finishes, stage 0 waits at its last
  // receive.
  std::vector<ActionList> lists = one_f_one_b_lists(4, 8);
  ActionList& stage1 = lists[1];
  ASSERT_EQ(stage1.back(), SG(7));
  stage1.pop_back();
  const PipelineSimulation sim = simulate_pipeline_actions(lists, 1);
  EXPECT_TRUE(sim.deadlocked);
  EXPECT_EQ(sim.blocked_at, (std::vector<int>{30, -1, -1, -1}));
  EXPECT_EQ(sim.deadlock,
            "stage 0 blocks at action 30 of 32, RecvGradient(m=7, chunk=0) from stage 1 chunk 0, "
            "which has finished its list without sending it");
  // The stages that did finish are timed as usual.
  expect_close("busy time, stage 3", sim.busy_time[3], 24, 0);
}

// A slow last stage sets the pace: 1F1B on 2 stages, the second twice as slow, runs the
// second without a pause from its first forward, and the first's last backward ends the step:
// F0 + M (F1 + B1) + B0 = 1 + 4 x 6 + 2 (worked through by hand).
TEST(PipelineSimulator, TakesACostPerStage) {
  const PipelineSimulation sim = simulate_pipeline_actions(
      pipeline_schedules(PipelineSchedule::OneFOneB, 2, 4, 1), 1, {{1, 2}, {2, 4}}, 0.0);
  expect_close("makespan", sim.makespan, 27, 1e-12);
  expect_close("busy, stage 1", sim.busy_time[1], 24, 1e-12);
  expect_close("idle, stage 1", sim.idle_time[1], 3,
               1e-12);  // the first forward's wait and the tail
  // Uniform costs through the per-stage form give the uniform simulation.
  const PipelineSimulation uniform = simulate_pipeline(PipelineSchedule::Interleaved, 4, 8, 2);
  const PipelineSimulation same =
      simulate_pipeline_actions(pipeline_schedules(PipelineSchedule::Interleaved, 4, 8, 2), 2,
                                std::vector<StageCost>(4), 0.0);
  EXPECT_EQ(same.makespan, uniform.makespan);
  EXPECT_EQ(same.bubble_fraction, uniform.bubble_fraction);
}

// Each message spends the transfer time on its link: one micro-batch over 2 stages crosses it
// twice (activation, then gradient).
TEST(PipelineSimulator, AddsTheTransferTimeToEachMessage) {
  const PipelineSimulation sim = simulate_pipeline_actions(
      pipeline_schedules(PipelineSchedule::OneFOneB, 2, 1, 1), 1, {{1, 2}, {2, 4}}, 0.5);
  expect_close("makespan", sim.makespan, 1 + 0.5 + 2 + 4 + 0.5 + 2, 1e-12);
  EXPECT_THROW(simulate_pipeline_actions(pipeline_schedules(PipelineSchedule::OneFOneB, 2, 1, 1), 1,
                                         {{1, 2}}, 0.0),
               InternalError);  // a cost for each stage
}

TEST(PipelineSimulator, RefusesAForwardBeforeItsActivation) {
  std::vector<ActionList> lists = one_f_one_b_lists(2, 2);
  ASSERT_EQ(lists[1][0], RA(0));
  std::swap(lists[1][0], lists[1][1]);
  try {
    simulate_pipeline_actions(lists, 1);
    ADD_FAILURE() << "a forward before its receive was simulated";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "stage 1: Forward(m=0, chunk=0) before its activation was received"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineSchedule, ValidationAgreesWithTheRules) {
  for (PipelineSchedule kind : kSchedules)
    for (int p = 0; p <= 6; ++p)
      for (int m = 0; m <= 12; ++m)
        for (int v = 0; v <= 3; ++v)
          EXPECT_EQ(config_error(kind, p, m, v).empty(), is_valid(kind, p, m, v))
              << label({kind, p, m, v}) << ": " << config_error(kind, p, m, v);
}

TEST(PipelineSchedule, RefusesBadConfigurationsNamingTheKey) {
  struct Case {
    PipelineSchedule kind;
    int p, m, v;
    std::string message;  // the start of the message
  };
  const std::vector<Case> cases = {
      {PipelineSchedule::OneFOneB, 0, 8, 1, "parallel.pipeline must be at least 1, got 0"},
      {PipelineSchedule::GPipe, 4, 0, 1,
       "the micro-batch count (training.global_batch_size / (parallel.micro_batch_size x "
       "parallel.data)) must be at least 1, got 0"},
      {PipelineSchedule::Interleaved, 4, 8, 0, "parallel.virtual_stages must be at least 1, got 0"},
      {PipelineSchedule::GPipe, 4, 8, 2,
       "parallel.virtual_stages (2) needs the interleaved pipeline schedule; the gpipe schedule "
       "runs one model chunk per rank"},
      {PipelineSchedule::OneFOneB, 4, 8, 3,
       "parallel.virtual_stages (3) needs the interleaved pipeline schedule; the 1f1b schedule"},
      {PipelineSchedule::Interleaved, 4, 6, 2,
       "interleaving needs the micro-batch count (6) to be a multiple of parallel.pipeline (4)"},
      {PipelineSchedule::Interleaved, 1, 4, 2,
       "parallel.virtual_stages (2) needs parallel.pipeline > 1"},
  };
  for (const Case& c : cases) {
    const std::string what = label({c.kind, c.p, c.m, c.v});
    const std::string message = config_error(c.kind, c.p, c.m, c.v);
    EXPECT_EQ(message.substr(0, c.message.size()), c.message) << what << ": " << message;
    EXPECT_THROW(pipeline_schedule(c.kind, c.p, c.m, c.v, 0), ConfigError) << what;
    EXPECT_THROW(simulate_pipeline(c.kind, c.p, c.m, c.v), ConfigError) << what;
  }
  // Interleaving one chunk on one stage is allowed (and is the plain schedule).
  EXPECT_EQ(config_error(PipelineSchedule::Interleaved, 1, 3, 1), "");
  EXPECT_EQ(pipeline_schedule(PipelineSchedule::Interleaved, 1, 2, 1, 0),
            (ActionList{F(0), B(0), F(1), B(1)}));
  // A stage outside the pipeline is a caller's bug, not a config error.
  EXPECT_THROW(pipeline_schedule(PipelineSchedule::OneFOneB, 4, 8, 1, 4), InternalError);
  EXPECT_THROW(pipeline_schedule(PipelineSchedule::OneFOneB, 4, 8, 1, -1), InternalError);
}

TEST(PipelineSchedule, PeersPastTheEndsAreBugs) {
  EXPECT_THROW(pipeline_peer(SA(0), 4, 1, 3), InternalError);
  EXPECT_THROW(pipeline_peer(RA(0), 4, 1, 0), InternalError);
  EXPECT_THROW(pipeline_peer(F(0), 4, 1, 1), InternalError);
  // The last rank's chunk 0 sends to rank 0's chunk 1.
  const PipelinePeer peer = pipeline_peer(SA(0, 0), 4, 2, 3);
  EXPECT_EQ(peer.stage, 0);
  EXPECT_EQ(peer.chunk, 1);
}

}  // namespace
}  // namespace ternion
