// What a resumed run changed against the run that saved its checkpoint. A resume takes this
// run's config as given (a longer training.steps, another layout), so that what it changed,
// and what that does to the learning rate at the first resumed step, is said in the log
// rather than found later in the loss curve.
#pragma once

#include <cstdint>
#include <string>

#include "training/train_config.h"

namespace ternion {

// "training.steps 10 -> 20, parallel.data 1 -> 2; the learning rate at step 11 is 6.73e-04
// where the saved run's schedule gives 1.45e-04", or "" where nothing that shapes training
// changed (checkpoint.* and logging.* are where a resume goes and what it writes, and are left
// out) or the checkpoint holds no readable config.yaml. Reads files only: never throws.
std::string resume_changes(const std::string& checkpoint_dir, const TrainConfig& config,
                           std::int64_t resumed_step);

}  // namespace ternion
