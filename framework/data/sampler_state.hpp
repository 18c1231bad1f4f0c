// SamplerState: where a BatchSampler is in its data, as saved in checkpoints.
#pragma once

#include <cstdint>

namespace strata::data {

struct SamplerState {
  std::uint64_t position = 0;  // global rows consumed by all dp ranks together
  std::uint64_t epoch = 0;     // epoch of the next row: position / windows (checked on restore)

  bool operator==(const SamplerState&) const = default;
};

}  // namespace strata::data
