// The memory hierarchy Strata accounts for (device → host → NVMe) and the categories every
// allocation is charged to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

enum class Tier : std::uint8_t { device, host, nvme };
inline constexpr std::size_t kNumTiers = 3;

enum class Category : std::uint8_t { params, grads, optimizer, activations, comm, workspace, other };
inline constexpr std::size_t kNumCategories = 7;

std::string_view tier_name(Tier t);          // "device", "host", "nvme"
std::string_view category_name(Category c);  // "params", ..., "comm buffers", ...

}  // namespace strata
