// The planner tests' model: 4 blocks of 64 wide, context 32, 8 sequences a step in
// micro-batches of 2, over the built-in corpus's token file in `dir`.
#pragma once

#include "training/train_config.h"
#include "training/training_test_support.h"

namespace ternion::testing_support {

inline TrainConfig small_model(const ScratchDir& dir) {
  TrainConfig c;
  c.model.seq_len = 32;
  c.model.n_layer = 4;
  c.model.n_head = 4;
  c.model.d_model = 64;
  c.parallel.micro_batch_size = 2;
  c.training.global_batch_size = 8;
  c.data.train = dir.file("train.bin");
  c.source = "small.yaml";
  return c;
}

}  // namespace ternion::testing_support
