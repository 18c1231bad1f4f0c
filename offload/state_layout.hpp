// How one unit's optimizer state is packed into a byte buffer: one segment per tensor of the
// unit's StateLayout (the f32 master, then the optimizer's declared tensors in order), each
// starting at a multiple of 4096 bytes so every segment can be read or written with O_DIRECT on
// its own. The master copy comes first, so a freshly created unit writes only that.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/train/state_store.hpp"

namespace strata::offload {

struct PackedStateLayout {
  train::StateLayout layout;
  // Byte offset of each tensor (the master when layout.master, then every declared tensor) and
  // the total, every one a multiple of 4096.
  struct Segment {
    std::uint64_t offset = 0;
    std::int64_t elements = 0;
    DType dtype = DType::f32;
    int tensor = -1;  // -1: the master; else the index in UnitOptimizerState::tensors
  };
  std::vector<Segment> segments;
  std::uint64_t total = 0;
  std::uint64_t bytes() const { return total; }
  // Bytes before the first segment that is not the master (what a new unit writes).
  std::uint64_t master_bytes() const;
};

PackedStateLayout pack(const train::StateLayout& l);

// Views of a packed unit inside `base` (tensors that do not own the memory) on `device` (the cpu,
// or meta for a planner's buffer without memory: base may then be nullptr).
train::UnitOptimizerState packed_views(const PackedStateLayout& p, std::byte* base,
                                       Device device = Device::cpu());

// The padded size of a packed unit: what the host and NVMe tiers hold per unit.
std::uint64_t packed_bytes(const train::StateLayout& l);

}  // namespace strata::offload
