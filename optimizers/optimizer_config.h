// The `optimizer:` config section: the update rule, its learning-rate schedule and clipping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/config_reader.h"

namespace ternion {

struct OptimizerConfig {
  std::string type = "adamw";     // adamw | sgd
  double lr = 3e-4;               // peak learning rate, reached after warm-up
  double min_lr = 0.0;            // where the decay ends, one step after the last
  std::int64_t warmup_steps = 0;  // linear warm-up from lr / warmup_steps
  std::string decay = "cosine";   // cosine | linear | sqrt | constant, from lr to min_lr
  std::int64_t decay_steps = 0;   // the last steps, which decay (0 = all after warm-up)
  double weight_decay = 0.1;      // decoupled (AdamW) or L2 (SGD); never on biases or norms
  double grad_clip = 1.0;         // clip the global gradient norm to this; 0 = off
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double momentum = 0.9;  // SGD only

  template <class V>
  void visit(V& v) {
    v("type", type, "adamw | sgd");
    v("lr", lr, "peak learning rate");
    v("min_lr", min_lr,
      "learning rate the decay reaches one step after the last (no step runs at it)");
    v("warmup_steps", warmup_steps, "linear warm-up steps");
    v("decay", decay, "cosine | linear | sqrt (1 - sqrt of the progress) | constant");
    v("decay_steps", decay_steps,
      "the run's last steps, over which lr decays after a stable stretch at the peak "
      "(warm-up-stable-decay, as torchtitan's decay_ratio and Megatron's WSD; 0 = every step "
      "after warm-up)");
    v("weight_decay", weight_decay, "on weight matrices and embeddings only");
    v("grad_clip", grad_clip, "max global gradient norm (0 = no clipping)");
    v("beta1", beta1, "AdamW first-moment decay");
    v("beta2", beta2, "AdamW second-moment decay");
    v("eps", eps, "AdamW denominator epsilon");
    v("momentum", momentum, "SGD momentum");
  }

  void validate(const ConfigDocument& doc) const;
  // The keys `type` does not read (refused where given).
  std::vector<std::string> unused_keys() const;
};

}  // namespace ternion
