#include "optimizers/adamw.h"
#include "optimizers/sgd.h"

namespace ternion {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          std::vector<Parameter*> params) {
  if (config.type == "sgd") return std::make_unique<Sgd>(config, std::move(params));
  TN_CHECK(config.type == "adamw", "unknown optimizer type ", config.type);
  return std::make_unique<AdamW>(config, std::move(params));
}

}  // namespace ternion
