#include "optimizers/adamw.h"
#include "optimizers/sgd.h"

namespace ternion {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          std::vector<ParameterSegment> segments) {
  if (config.type == "sgd") return std::make_unique<Sgd>(config, std::move(segments));
  TN_CHECK(config.type == "adamw", "unknown optimizer type ", config.type);
  return std::make_unique<AdamW>(config, std::move(segments));
}

}  // namespace ternion
