#include "parallel/parallel_config.h"

#include <string>

namespace ternion {

void ParallelConfig::validate(const ConfigDocument& doc, std::int64_t world_size) const {
  const char* kSection = "parallel";
  if (tensor < 1) config_fail(doc, kSection, "tensor", "must be at least 1");
  if (pipeline < 1) config_fail(doc, kSection, "pipeline", "must be at least 1");
  if (data < 0) config_fail(doc, kSection, "data", "must be at least 1 (or 0 to derive it)");
  if (micro_batch_size < 1) config_fail(doc, kSection, "micro_batch_size", "must be at least 1");
  // This build trains on a single rank; the process-group manager that splits ranks into
  // data, tensor and pipeline groups is the next layer of the stack (parallel/ and comm/).
  if (tensor != 1)
    config_fail(doc, kSection, "tensor", "must be 1: this build trains on one rank");
  if (pipeline != 1)
    config_fail(doc, kSection, "pipeline", "must be 1: this build trains on one rank");
  if (data_size(world_size) != 1)
    config_fail(doc, kSection, "data", "must be 1: this build trains on one rank");
}

}  // namespace ternion
