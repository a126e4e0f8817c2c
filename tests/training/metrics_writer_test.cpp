// The metrics file across runs (training/metrics_writer.h): a fresh run replaces it only when
// it finishes; a resumed run keeps the earlier lines up to its checkpoint, from the finished
// file or from the .partial a crashed run left.
#include "training/metrics_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "training_test_support.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;

StepMetrics metrics_of(std::int64_t step, double loss) {
  StepMetrics m;
  m.step = step;
  m.loss = loss;
  return m;
}

std::string line_of(std::int64_t step, double loss) { return metrics_json(metrics_of(step, loss)); }

// Lines for steps [first, last], with `loss` telling the runs apart.
std::string lines_of(std::int64_t first, std::int64_t last, double loss) {
  std::string text;
  for (std::int64_t s = first; s <= last; ++s) text += line_of(s, loss) + "\n";
  return text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Runs the steps after `resumed_step` through `last`, as a run of loss `loss` would.
void run_steps(const std::string& path, std::int64_t resumed_step, std::int64_t last, double loss) {
  MetricsWriter writer(path, resumed_step);
  for (std::int64_t s = resumed_step + 1; s <= last; ++s) writer.write(metrics_of(s, loss));
  writer.finish();
}

// A run that stops on an error (a diverged run, a failed save) leaves the finished file of
// the run before it, and its own lines in FILE.partial; one that finishes replaces the file.
TEST(MetricsWriter, AFreshRunReplacesTheFileWhenItFinishes) {
  ScratchDir dir("metrics-fresh");
  const std::string path = dir.file("m.jsonl");
  write_file(path, lines_of(1, 5, 1.0));
  for (const bool finishes : {false, true}) {
    MetricsWriter writer(path);
    writer.write(metrics_of(1, 2.0));
    EXPECT_EQ(read_file(path), lines_of(1, 5, 1.0)) << "replaced before the run finished";
    if (finishes) writer.finish();
  }  // without finish(): the run threw
  EXPECT_EQ(read_file(path), lines_of(1, 1, 2.0));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(MetricsWriter, AResumedRunKeepsTheFinishedFilesLinesUpToItsStep) {
  ScratchDir dir("metrics-finished");
  const std::string path = dir.file("m.jsonl");
  write_file(path, lines_of(1, 10, 1.0));
  run_steps(path, 5, 8, 2.0);  // resumed from step 5: steps 6..10 of the old run are dropped
  EXPECT_EQ(read_file(path), lines_of(1, 5, 1.0) + lines_of(6, 8, 2.0));
}

// A run killed with SIGKILL leaves FILE.partial, its last line perhaps cut short; the run that
// resumes from its last checkpoint keeps its lines up to that step.
TEST(MetricsWriter, AResumedRunKeepsACrashedRunsPartialLines) {
  ScratchDir dir("metrics-crashed");
  const std::string path = dir.file("m.jsonl");
  write_file(path + ".partial", lines_of(1, 7, 1.0) + "{\"step\": 8, \"loss\": 1.");
  run_steps(path, 6, 9, 2.0);
  EXPECT_EQ(read_file(path), lines_of(1, 6, 1.0) + lines_of(7, 9, 2.0));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

// A finished run, then a resumed one that crashed: its .partial holds the newer record (the
// finished file's lines up to its resume, then its own), and is the one continued.
TEST(MetricsWriter, ACrashedRunsPartialIsNewerThanTheFinishedFile) {
  ScratchDir dir("metrics-both");
  const std::string path = dir.file("m.jsonl");
  write_file(path, lines_of(1, 10, 1.0));
  write_file(path + ".partial", lines_of(1, 10, 1.0) + lines_of(11, 15, 2.0));
  run_steps(path, 13, 16, 3.0);
  EXPECT_EQ(read_file(path), lines_of(1, 10, 1.0) + lines_of(11, 13, 2.0) + lines_of(14, 16, 3.0));
}

// A run resumed from an older checkpoint that died before reaching the newer one leaves a
// .partial that stops short of it: a resume from the newer checkpoint takes the finished file.
TEST(MetricsWriter, APartialThatStopsShortOfTheStepGivesWayToTheFinishedFile) {
  ScratchDir dir("metrics-short");
  const std::string path = dir.file("m.jsonl");
  write_file(path, lines_of(1, 10, 1.0));
  write_file(path + ".partial", lines_of(1, 5, 1.0) + "{\"step\": 6, \"lo");
  run_steps(path, 10, 12, 2.0);
  EXPECT_EQ(read_file(path), lines_of(1, 10, 1.0) + lines_of(11, 12, 2.0));
  // Neither reaches the step: the one that goes further, with the gap.
  write_file(path, lines_of(1, 4, 1.0));
  write_file(path + ".partial", lines_of(1, 7, 3.0));
  run_steps(path, 9, 10, 2.0);
  EXPECT_EQ(read_file(path), lines_of(1, 7, 3.0) + lines_of(10, 10, 2.0));
}

TEST(MetricsWriter, AResumedRunWithoutEarlierLinesStartsAtItsStep) {
  ScratchDir dir("metrics-none");
  const std::string path = dir.file("m.jsonl");
  run_steps(path, 5, 7, 2.0);
  EXPECT_EQ(read_file(path), lines_of(6, 7, 2.0));
}

}  // namespace
}  // namespace ternion
