// The `ternion-train` command line, as a library function so that programs with layers of
// their own (examples/custom_block/) register them and then run exactly the same trainer.
//
//   ternion-train --config FILE [--set section.key=value ...] [--dry-run] [--print-config]
//
// Returns the process exit status: 0 on success, 1 for bad input (config, data) with one
// line "ternion-train: error: ..." on stderr, 2 for a bad command line.
#pragma once

namespace ternion {

int train_main(int argc, char** argv);

}  // namespace ternion
