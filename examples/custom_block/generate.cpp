// ternion-generate with the example's block type registered, so that it samples from the
// checkpoints custom_block_train writes (the stock ternion-generate knows only the built-in
// blocks, and says so):
//   custom_block_generate --checkpoint DIR --prompt "The " --max-tokens 200
#include "parallel_block.h"
#include "training/generate_cli.h"

int main(int argc, char** argv) {
  example::register_parallel_block();
  return ternion::generate_main(argc, argv);
}
