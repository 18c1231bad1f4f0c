// How one unit's optimizer state (f32 master, m, v) is packed into a byte buffer: one segment
// per tensor, each rounded up to 4096 bytes so every segment can be read or written with O_DIRECT
// on its own. The master copy comes first, so a freshly created unit writes only that.
#pragma once

#include <cstdint>

#include "framework/train/state_store.hpp"

namespace strata::offload {

struct PackedStateLayout {
  train::StateLayout layout;
  std::uint64_t segment = 0;  // bytes per segment (round_up_io(elements × 4))
  int segments = 0;           // master? + m + v?
  std::uint64_t bytes() const { return segment * static_cast<std::uint64_t>(segments); }
  std::uint64_t master_bytes() const { return layout.master ? segment : 0; }
};

PackedStateLayout pack(const train::StateLayout& l);

// Views of a packed unit inside `base` (f32 tensors that do not own the memory) on `device` (the
// cpu, or meta for a planner's buffer without memory).
train::UnitOptimizerState packed_views(const PackedStateLayout& p, std::byte* base,
                                       Device device = Device::cpu());

// The padded size of a packed unit for `elements` parameters with master and v: what the host
// and NVMe tiers hold per unit.
std::uint64_t packed_bytes(std::int64_t elements, bool master, bool second_moment);

}  // namespace strata::offload
