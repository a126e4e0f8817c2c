// ternion-train with one more block type: register it, then run the stock command line.
//   custom_block_train --config examples/custom_block/config.yaml
// (generate.cpp does the same for ternion-generate, to sample from its checkpoints.)
#include "parallel_block.h"
#include "training/train_cli.h"

int main(int argc, char** argv) {
  example::register_parallel_block();
  return ternion::train_main(argc, argv);
}
