#include "training/resume_changes.h"

#include <cstdio>
#include <filesystem>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "framework/config_reader.h"
#include "framework/error.h"
#include "optimizers/lr_schedule.h"

namespace ternion {

namespace {

// Each key of the config that shapes training, with its value as text, in the printed order.
// Left out: where the run loads and saves, what it logs, its thread count and time limit
// (results do not depend on them).
std::vector<std::pair<std::string, std::string>> scalars_of(const YAML::Node& root) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    if (name == "checkpoint" || name == "logging" || !section.second.IsMap()) continue;
    for (const auto& key : section.second)
      if ((key.second.IsScalar() || key.second.IsNull()) &&
          !(name == "training" &&
            (key.first.Scalar() == "threads" || key.first.Scalar() == "time_limit_minutes")))
        out.emplace_back(name + "." + key.first.Scalar(),
                         key.second.IsNull() ? "" : key.second.Scalar());
  }
  return out;
}

std::string lr_text(double lr) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", lr);
  return text;
}

}  // namespace

std::string resume_changes(const std::string& checkpoint_dir, const TrainConfig& config,
                           std::int64_t resumed_step) {
  try {
    const std::string saved_path =
        (std::filesystem::path(checkpoint_dir) / "config.yaml").string();
    // The saved run's settings, each key it predates at its default: the behaviour it had then.
    ConfigDocument doc = ConfigDocument::load_file(saved_path);
    const TrainConfig was = TrainConfig::read_unchecked(doc);
    const YAML::Node saved = YAML::Load(config_yaml(was));
    const YAML::Node ours = YAML::Load(config_yaml(config));
    std::string changes;
    bool schedule_changed = false;
    for (const auto& [key, value] : scalars_of(ours)) {
      const std::size_t dot = key.find('.');
      const YAML::Node section = saved[key.substr(0, dot)];
      if (!section || !section.IsMap()) continue;
      const YAML::Node before = section[key.substr(dot + 1)];
      // A key of another model family or optimizer (whose own key names the change).
      if (!before || !(before.IsScalar() || before.IsNull())) continue;
      const std::string was = before.IsNull() ? "" : before.Scalar();
      if (was == value) continue;
      changes += (changes.empty() ? "" : ", ") + key + " " + (was.empty() ? "''" : was) +
                 " -> " + (value.empty() ? "''" : value);
      schedule_changed |= key == "training.steps" || key.rfind("optimizer.", 0) == 0;
    }
    if (changes.empty() || !schedule_changed) return changes;
    const std::int64_t step = resumed_step + 1;
    const double before = learning_rate_at(was.optimizer, step, was.training.steps);
    const double now = learning_rate_at(config.optimizer, step, config.training.steps);
    if (lr_text(before) != lr_text(now))
      changes += "; the learning rate at step " + std::to_string(step) + " is " + lr_text(now) +
                 " where the saved run's schedule gives " + lr_text(before);
    return changes;
  } catch (const std::exception&) {
    return "";  // an old or damaged config.yaml: the load itself has checked what it needs
  }
}

}  // namespace ternion
