// ternion-plan as a program: what --write-config leaves on disk when the write fails.
#include "planner/plan_cli.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "small_model.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;
using testing_support::small_model;

int run_plan(std::vector<std::string> args) {
  args.insert(args.begin(), "ternion-plan");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return plan_main(static_cast<int>(argv.size()), argv.data());
}

std::set<std::string> names_in(const ScratchDir& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    names.insert(entry.path().filename().string());
  return names;
}

TEST(PlanCli, AConfigThatCannotBeWrittenLeavesNoTemporaryBehind) {
  ScratchDir dir("plan-write-config");
  testing_support::prepare_builtin(dir);
  std::ofstream(dir.file("small.yaml")) << config_yaml(small_model(dir));
  std::filesystem::create_directory(dir.file("taken"));  // a directory where the file would go
  const std::set<std::string> before = names_in(dir);
  const std::vector<std::string> plan = {
      "--config", dir.file("small.yaml"), "--cluster",
      std::string(TERNION_SOURCE_DIR) + "/configs/clusters/cpu-local.yaml", "--write-config"};
  std::vector<std::string> args = plan;
  args.push_back(dir.file("taken"));
  EXPECT_EQ(run_plan(args), 1);
  EXPECT_EQ(names_in(dir), before);  // no taken.tmp left for the next run to trip over

  args = plan;
  args.push_back(dir.file("best.yaml"));
  EXPECT_EQ(run_plan(args), 0);
  std::set<std::string> after = before;
  after.insert("best.yaml");
  EXPECT_EQ(names_in(dir), after);
}

// An empty --layout is a bad layout, not a request for the search.
TEST(PlanCli, AnEmptyLayoutIsRefused) {
  ScratchDir dir("plan-empty-layout");
  std::ofstream(dir.file("small.yaml")) << config_yaml(small_model(dir));
  EXPECT_EQ(run_plan({"--config", dir.file("small.yaml"), "--cluster",
                      std::string(TERNION_SOURCE_DIR) + "/configs/clusters/cpu-local.yaml",
                      "--layout", ""}),
            2);
}

}  // namespace
}  // namespace ternion
