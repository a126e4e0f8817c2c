// The `data:` config section: token files in llm.c's .bin layout (see data/token_shard.h).
#pragma once

#include <string>

#include "framework/config_reader.h"

namespace ternion {

struct DataConfig {
  std::string train;  // required
  std::string val;    // optional; needed when training.eval_interval > 0

  template <class V>
  void visit(V& v) {
    v("train", train, "training tokens (.bin from ternion-prepare)");
    v("val", val, "validation tokens (.bin); empty = no evaluation");
  }
};

}  // namespace ternion
