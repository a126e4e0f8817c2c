// The `data:` config section: token files in llm.c's .bin layout (data/token_shard.h), each
// split one file, a directory of them or a glob (data/token_dataset.h), data.train also a
// blend of such datasets by weight (data/blend_spec.h), and the tokenizer that made them.
#pragma once

#include <string>

#include "framework/config_reader.h"

namespace ternion {

struct DataConfig {
  std::string train;  // required
  std::string val;    // optional; needed when training.eval_interval > 0
  std::string tokenizer;  // a tokenizer.json; empty = bytes

  template <class V>
  void visit(V& v) {
    v("train", train,
      "training tokens: a .bin file from ternion-prepare, a directory of them, or a glob "
      "(dir/train_*.bin); or a blend, WEIGHT PATH pairs as Megatron's --data-path: "
      "'0.7 web/train_*.bin 0.3 books.bin' draws each sequence from web with probability 0.7");
    v("val", val,
      "validation tokens, a file, directory or glob as data.train's (no weights: read in order); "
      "empty = no evaluation");
    v("tokenizer", tokenizer,
      "the tokenizer.json the tokens came from (ternion-prepare writes one beside them); "
      "empty = bytes. Prompts and samples are text through it; checkpoints keep a copy");
  }
};

}  // namespace ternion
