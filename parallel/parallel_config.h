// The `parallel:` config section: how ranks are split and how a global batch is cut.
#pragma once

#include <cstdint>

#include "framework/config_reader.h"

namespace ternion {

struct ParallelConfig {
  std::int64_t tensor = 1;            // tensor-parallel size (tp)
  std::int64_t pipeline = 1;          // pipeline-parallel size (pp)
  std::int64_t data = 1;              // data-parallel size (dp); 0 = world size / (tp * pp)
  std::int64_t micro_batch_size = 4;  // sequences per forward/backward pass

  template <class V>
  void visit(V& v) {
    v("tensor", tensor, "tensor-parallel ranks");
    v("pipeline", pipeline, "pipeline stages");
    v("data", data, "data-parallel replicas (0 = derive from the world size)");
    v("micro_batch_size", micro_batch_size, "sequences per micro-batch");
  }

  // Checks the values on their own; `world_size` is the number of ranks the job runs on.
  void validate(const ConfigDocument& doc, std::int64_t world_size) const;
  std::int64_t data_size(std::int64_t world_size) const {
    return data > 0 ? data : world_size / (tensor * pipeline);
  }
};

}  // namespace ternion
