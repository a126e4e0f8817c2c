// Which checkpoints a save leaves in checkpoint.save_dir (checkpoint.keep = N).
//
// A save_dir may hold more than this run's checkpoints: those of the run it resumed (older
// steps, the same trajectory), and those of another trajectory (a fresh run in a used
// save_dir, or a run resumed from an older step: their steps may be higher than this run's).
// After saving step s:
//   - the checkpoint of step s is kept (it is the one `latest` names);
//   - of the checkpoints of steps up to s, N are kept: this run's most recent saves first
//     and, while it has saved fewer than N, the newest of the others (a resumed run keeps
//     the checkpoints it continues from); the rest are deleted;
//   - checkpoints of steps after s are another trajectory's: they are not deleted while they
//     are ahead, and the first save that finds them reports them, so the user can move them;
//     once this run saves past them, they are among the checkpoints of steps up to s above.
//   - with checkpoint.keep_every = M > 0, checkpoints of steps that are multiples of M are
//     milestones (llm.c's major checkpoints): counted among the N while they are recent, and
//     never deleted once they are not.
// Step numbers come from the directory names (step_0000100), compared as numbers.
#pragma once

#include <cstdint>
#include <vector>

namespace ternion {

class CheckpointRetention {
 public:
  explicit CheckpointRetention(std::int64_t keep, std::int64_t keep_every = 0);

  struct Decision {
    std::vector<std::int64_t> remove;  // steps to delete
    std::vector<std::int64_t> newer;   // steps after the one saved, left in place
    bool report_newer = false;         // the first time this run finds such steps
  };
  // Records the save of `saved` (among `on_disk`, the steps of the complete checkpoints in
  // save_dir) and says which of `on_disk` to delete.
  Decision after_save(std::int64_t saved, const std::vector<std::int64_t>& on_disk);

 private:
  std::int64_t keep_;
  std::int64_t keep_every_;                      // 0: no milestones
  std::vector<std::int64_t> saved_by_this_run_;  // in the order saved
  bool reported_newer_ = false;
};

}  // namespace ternion
