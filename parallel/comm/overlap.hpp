// Whether two byte ranges share memory: collectives check it to refuse (or handle) an output
// that overlaps its input without being the same buffer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::parallel {

inline bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return an > 0 && bn > 0 && pa < pb + bn && pb < pa + an;
}

}  // namespace strata::parallel
