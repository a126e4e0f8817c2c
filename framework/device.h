// Where a tensor's memory lives. Kernels dispatch on it; layers never look at it.
//
// The meta device holds shapes and no memory (PyTorch's name for the same idea): a model and a
// whole training step run on it compute nothing, but allocate and free exactly what they would
// on a real device, which is how a run's memory is estimated before it starts
// (training/memory_estimate.h). Kernels check their arguments and return; a meta tensor's
// elements cannot be read (to_vector gives zeros), and copies to or from it move nothing.
#pragma once

#include <cstdint>
#include <string>

namespace ternion {

enum class DeviceType : std::uint8_t { CPU, CUDA, Meta };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index) { return {DeviceType::CUDA, index}; }
  static Device meta() { return {DeviceType::Meta, 0}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_meta() const { return type == DeviceType::Meta; }
  bool operator==(const Device&) const = default;
  std::string str() const {
    if (type == DeviceType::CPU) return "cpu";
    if (type == DeviceType::Meta) return "meta";
    return "cuda:" + std::to_string(index);
  }
};

}  // namespace ternion
