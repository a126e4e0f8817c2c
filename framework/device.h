// Where a tensor's memory lives. Kernels dispatch on it; layers never look at it.
#pragma once

#include <cstdint>
#include <string>

namespace ternion {

enum class DeviceType : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool operator==(const Device&) const = default;
  std::string str() const {
    return type == DeviceType::CPU ? std::string("cpu") : "cuda:" + std::to_string(index);
  }
};

}  // namespace ternion
