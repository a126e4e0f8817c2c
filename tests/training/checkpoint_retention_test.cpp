// Which checkpoints a save prunes (training/checkpoint_retention.h), on step lists alone; the
// directories themselves are tested in tests/checkpoint_mpi/.
#include "training/checkpoint_retention.h"

#include <gtest/gtest.h>

namespace ternion {
namespace {

using Steps = std::vector<std::int64_t>;

TEST(CheckpointRetention, KeepsTheNewestOfOneRun) {
  CheckpointRetention retention(2);
  EXPECT_EQ(retention.after_save(5, {5}).remove, Steps{});
  EXPECT_EQ(retention.after_save(10, {5, 10}).remove, Steps{});
  EXPECT_EQ(retention.after_save(15, {5, 10, 15}).remove, Steps{5});
  EXPECT_EQ(retention.after_save(20, {10, 15, 20}).remove, Steps{10});
}

// A fresh run in a save_dir another run filled with later steps: its own saves stay, the
// later steps are left alone and reported once.
TEST(CheckpointRetention, NeverDeletesTheSaveNorLaterSteps) {
  CheckpointRetention retention(2);
  const CheckpointRetention::Decision first = retention.after_save(2, {2, 5, 10});
  EXPECT_EQ(first.remove, Steps{});
  EXPECT_EQ(first.newer, (Steps{5, 10}));
  EXPECT_TRUE(first.report_newer);
  const CheckpointRetention::Decision second = retention.after_save(4, {2, 4, 5, 10});
  EXPECT_EQ(second.remove, Steps{});
  EXPECT_EQ(second.newer, (Steps{5, 10}));
  EXPECT_FALSE(second.report_newer);  // once per run
  EXPECT_EQ(retention.after_save(6, {2, 4, 5, 6, 10}).remove, (Steps{2, 5}));
}

// keep_every's multiples (llm.c's major checkpoints) count among keep's newest while they are,
// and are never deleted after.
TEST(CheckpointRetention, MilestonesAreNeverDeleted) {
  CheckpointRetention retention(2, 10);
  EXPECT_EQ(retention.after_save(5, {5}).remove, Steps{});
  EXPECT_EQ(retention.after_save(10, {5, 10}).remove, Steps{});
  EXPECT_EQ(retention.after_save(15, {5, 10, 15}).remove, Steps{5});
  EXPECT_EQ(retention.after_save(20, {10, 15, 20}).remove, Steps{});  // 10 is past the newest 2
  EXPECT_EQ(retention.after_save(25, {10, 15, 20, 25}).remove, Steps{15});
  EXPECT_EQ(retention.after_save(30, {10, 20, 25, 30}).remove, Steps{});
  EXPECT_EQ(retention.after_save(35, {10, 20, 25, 30, 35}).remove, Steps{25});
  // Another run's milestones stay too.
  CheckpointRetention other(1, 4);
  EXPECT_EQ(other.after_save(9, {2, 4, 6, 8, 9}).remove, (Steps{2, 6}));
}

TEST(CheckpointRetention, KeepOneKeepsOnlyTheSave) {
  CheckpointRetention retention(1);
  EXPECT_EQ(retention.after_save(6, {5, 6, 10}).remove, Steps{5});
  EXPECT_EQ(retention.after_save(7, {6, 7, 10}).remove, Steps{6});
}

// A resumed run keeps the checkpoints it continues from while it has saved fewer than keep.
TEST(CheckpointRetention, AResumedRunKeepsTheCheckpointsBeforeIt) {
  CheckpointRetention retention(3);
  EXPECT_EQ(retention.after_save(11, {8, 9, 10, 11}).remove, Steps{8});
  EXPECT_EQ(retention.after_save(12, {9, 10, 11, 12}).remove, Steps{9});
}

// This run's saves outrank older checkpoints of another run with steps between them.
TEST(CheckpointRetention, ThisRunsSavesComeBeforeOtherRunsOlderSteps) {
  CheckpointRetention retention(2);
  EXPECT_EQ(retention.after_save(2, {2, 3}).remove, Steps{});
  EXPECT_EQ(retention.after_save(4, {2, 3, 4}).remove, Steps{3});
}

// Saving a step again (after resuming from an older one) counts it once, as the latest save.
TEST(CheckpointRetention, ASavedAgainStepCountsOnce) {
  CheckpointRetention retention(2);
  EXPECT_EQ(retention.after_save(3, {3, 4, 5}).remove, Steps{});
  EXPECT_EQ(retention.after_save(4, {3, 4, 5}).remove, Steps{});
  EXPECT_EQ(retention.after_save(4, {3, 4, 5}).remove, Steps{});
  EXPECT_EQ(retention.after_save(5, {3, 4, 5}).remove, Steps{3});
}

// Steps are numbers: step 10000000 (an eighth digit) is newer than 9999999.
TEST(CheckpointRetention, StepsCompareAsNumbers) {
  CheckpointRetention retention(1);
  EXPECT_EQ(retention.after_save(10000000, {9999999, 10000000}).remove, Steps{9999999});
}

}  // namespace
}  // namespace ternion
