// Optimizers update a list of parameter segments from their gradients: whole parameters, or
// under ZeRO-1 this rank's shares of them. They see Parameters (value, grad, weight-decay
// flag), never layers; their state covers the segments alone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/parameter.h"
#include "optimizers/optimizer_config.h"

namespace ternion {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update at learning rate `lr`; gradients are multiplied by `grad_scale` first (the
  // clipping factor). `step` counts the updates applied, this one included (1-based): the
  // trainer's steps skipped for non-finite gradients are not counted.
  virtual void step(float lr, float grad_scale, std::int64_t step) = 0;
  // Bytes of optimizer state held by this rank.
  virtual std::size_t state_bytes() const = 0;
  // The state, for checkpoints: its kinds ("m", "v"; "momentum") and, for segment i, one
  // tensor of each kind, flat over the segment's elements.
  virtual std::vector<std::string> state_kinds() const = 0;
  virtual std::vector<Tensor> state_of(std::size_t segment) const = 0;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          std::vector<ParameterSegment> segments);

}  // namespace ternion
