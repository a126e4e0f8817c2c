// The files a run writes, checked at setup (a dry run's too), so that a run does not train for
// hours to fail when it writes them: checkpoint.save_dir, logging.flight_dir (every rank's),
// logging.metrics_file and logging.trace_file (rank 0's).
#pragma once

#include <string>
#include <vector>

#include "training/train_config.h"

namespace ternion {

// A ConfigError naming the key and the path where one of this rank's outputs cannot be
// written, or would replace a file the run reads (its data's shards, `data_files`; its config
// file; its tokenizer; the checkpoint it loads, the weights of model.init_from) or the other
// output file. Creates save_dir, as a save would, and
// nothing else. Local: every rank calls it, and the ranks agree on the outcome.
void check_outputs_writable(const TrainConfig& config, int rank,
                            const std::vector<std::string>& data_files);

}  // namespace ternion
