// Everything a training step may change on this rank, as bits: each parameter's value and each
// optimizer state tensor, by name. A skipped step must leave all of it as it was (a NaN
// included, which no float comparison equals).
#pragma once

#include <bit>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "training/trainer.h"

namespace ternion::test {

inline std::map<std::string, std::vector<std::uint32_t>> trainer_state_bits(const Trainer& t) {
  std::map<std::string, std::vector<std::uint32_t>> state;
  auto add = [&](const std::string& name, const Tensor& tensor) {
    std::vector<std::uint32_t>& bits = state[name];
    for (float v : tensor.to_vector()) bits.push_back(std::bit_cast<std::uint32_t>(v));
  };
  for (const Parameter* p : t.parameters()) add("value of " + p->name, p->value);
  const std::vector<std::string> kinds = t.optimizer().state_kinds();
  for (std::size_t i = 0; i < t.optimizer_segments().size(); ++i) {
    const std::vector<Tensor> tensors = t.optimizer().state_of(i);
    for (std::size_t k = 0; k < tensors.size(); ++k)
      add(kinds[k] + " of " + t.optimizer_segments()[i].param->name + " from " +
              std::to_string(t.optimizer_segments()[i].begin), tensors[k]);
  }
  return state;
}

// The names whose bits differ between two states of one rank.
inline std::vector<std::string> changed_state(
    const std::map<std::string, std::vector<std::uint32_t>>& before,
    const std::map<std::string, std::vector<std::uint32_t>>& after) {
  std::vector<std::string> changed;
  for (const auto& [name, bits] : before) {
    const auto it = after.find(name);
    if (it == after.end() || it->second != bits) changed.push_back(name);
  }
  return changed;
}

}  // namespace ternion::test
