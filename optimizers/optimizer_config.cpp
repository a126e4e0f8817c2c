#include "optimizers/optimizer_config.h"

namespace ternion {

void OptimizerConfig::validate(const ConfigDocument& doc) const {
  const char* kSection = "optimizer";
  if (type != "adamw" && type != "sgd")
    config_fail(doc, kSection, "type", "must be adamw or sgd, got '" + type + "'");
  if (!(lr > 0)) config_fail(doc, kSection, "lr", "must be positive");
  if (!(min_lr >= 0) || min_lr > lr)
    config_fail(doc, kSection, "min_lr", "must be between 0 and optimizer.lr");
  if (warmup_steps < 0) config_fail(doc, kSection, "warmup_steps", "must not be negative");
  if (decay != "cosine" && decay != "linear" && decay != "sqrt" && decay != "constant")
    config_fail(doc, kSection, "decay",
                "must be cosine, linear, sqrt or constant, got '" + decay + "'");
  if (decay_steps < 0) config_fail(doc, kSection, "decay_steps", "must not be negative");
  // An unused key (printed commented out), refused here with its own reason.
  if (decay_steps > 0 && decay == "constant")
    config_fail(doc, kSection, "decay_steps", "has no effect: optimizer.decay is constant");
  if (!(weight_decay >= 0)) config_fail(doc, kSection, "weight_decay", "must not be negative");
  if (!(grad_clip >= 0)) config_fail(doc, kSection, "grad_clip", "must not be negative");
  // The update runs in float: a beta that rounds to 1 there leaves a bias correction of 0 to
  // divide by, and an eps that rounds to 0 divides 0 by 0 on a zero gradient.
  auto below_one = [](double beta) { return beta >= 0 && static_cast<float>(beta) < 1.0f; };
  if (!below_one(beta1))
    config_fail(doc, kSection, "beta1", "must be in [0, 1), and below 1 as a float");
  if (!below_one(beta2))
    config_fail(doc, kSection, "beta2", "must be in [0, 1), and below 1 as a float");
  if (!(eps > 0 && static_cast<float>(eps) > 0))
    config_fail(doc, kSection, "eps", "must be positive, and above 0 as a float");
  if (!(momentum >= 0 && momentum < 1)) config_fail(doc, kSection, "momentum", "must be in [0, 1)");
  refuse_unused_keys(doc, kSection, *this, unused_keys(),
                     type == "sgd" ? "is an AdamW key: optimizer.type sgd keeps no moments"
                                   : "is an SGD key: optimizer.type adamw has no momentum");
}

std::vector<std::string> OptimizerConfig::unused_keys() const {
  std::vector<std::string> keys = type == "sgd" ? std::vector<std::string>{"beta1", "beta2", "eps"}
                                                : std::vector<std::string>{"momentum"};
  if (decay == "constant") keys.push_back("decay_steps");
  return keys;
}

}  // namespace ternion
