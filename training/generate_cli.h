// The `ternion-generate` command line:
//   ternion-generate --checkpoint DIR --prompt TEXT [--max-tokens N] [--temperature T]
//                    [--top-k K] [--seed S]
// DIR is a checkpoint directory or a save_dir with a `latest`. The model is rebuilt on one
// rank from the checkpoint's config.yaml, whatever layout trained it.
#pragma once

namespace ternion {

int generate_main(int argc, char** argv);

}  // namespace ternion
