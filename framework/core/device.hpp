// Where a tensor's storage lives: the CPU, CUDA device i, or nowhere (meta: the memory planner's
// device — allocations are charged to the ledger but nothing is allocated, and ops do nothing).
#pragma once

#include <string>
#include <string_view>

namespace strata {

enum class DeviceType { cpu, cuda, meta };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  // Tensors with a size and no memory: Storage charges the ledger and allocates nothing, ops
  // check their arguments and compute nothing (parallel/plan runs a real training step on it).
  static Device meta() { return {DeviceType::meta, 0}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool is_meta() const { return type == DeviceType::meta; }
  std::string str() const;  // "cpu", "cuda:1", "meta"
  bool operator==(const Device&) const = default;
};


}  // namespace strata
