// Where a tensor's storage lives: the CPU, or CUDA device i.
#pragma once

#include <string>
#include <string_view>

namespace strata {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;  // "cpu", "cuda:1"
  bool operator==(const Device&) const = default;
};

// Parses "cpu", "cuda", "cuda:3". Throws UserError otherwise.
Device parse_device(std::string_view s);

}  // namespace strata
