#include "training/checkpoint_retention.h"

#include <algorithm>
#include <set>

#include "framework/error.h"

namespace ternion {

CheckpointRetention::CheckpointRetention(std::int64_t keep, std::int64_t keep_every)
    : keep_(keep), keep_every_(keep_every) {
  TN_CHECK(keep >= 1, "checkpoint.keep must be at least 1, got ", keep);
  TN_CHECK(keep_every >= 0, "checkpoint.keep_every must not be negative, got ", keep_every);
}

CheckpointRetention::Decision CheckpointRetention::after_save(
    std::int64_t saved, const std::vector<std::int64_t>& on_disk) {
  saved_by_this_run_.erase(
      std::remove(saved_by_this_run_.begin(), saved_by_this_run_.end(), saved),
      saved_by_this_run_.end());
  saved_by_this_run_.push_back(saved);
  const std::set<std::int64_t> disk(on_disk.begin(), on_disk.end());

  // Steps up to `saved` in the order they are kept: this run's saves, most recent first, then
  // the others, newest first.
  std::vector<std::int64_t> order;
  for (auto s = saved_by_this_run_.rbegin(); s != saved_by_this_run_.rend(); ++s)
    if (*s <= saved && disk.count(*s) != 0) order.push_back(*s);
  if (std::find(order.begin(), order.end(), saved) == order.end())
    order.insert(order.begin(), saved);  // kept even when the listing missed it
  for (auto s = disk.rbegin(); s != disk.rend(); ++s)
    if (*s < saved && std::find(order.begin(), order.end(), *s) == order.end())
      order.push_back(*s);

  Decision decision;
  for (std::size_t i = static_cast<std::size_t>(keep_); i < order.size(); ++i)
    if (keep_every_ == 0 || order[i] % keep_every_ != 0)  // milestones stay
      decision.remove.push_back(order[i]);
  std::sort(decision.remove.begin(), decision.remove.end());
  for (std::int64_t s : disk)
    if (s > saved) decision.newer.push_back(s);
  decision.report_newer = !decision.newer.empty() && !reported_newer_;
  reported_newer_ = reported_newer_ || decision.report_newer;
  return decision;
}

}  // namespace ternion
