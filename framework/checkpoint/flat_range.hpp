// From a rank's contiguous range [lo, hi) of a unit's flat buffer (as ZeRO assigns them) to the
// per-parameter slices it covers: the range may start or end inside a parameter, and padding
// past the last parameter is never stored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "framework/checkpoint/slice.hpp"

namespace strata::checkpoint {

// A parameter's place in its unit's flat buffer.
struct FlatParam {
  std::string name;
  Shape shape;
  std::int64_t offset = 0;  // first element in the flat buffer
};

// The part of parameter `param` (index into the list) that [lo, hi) covers: elements
// [begin, end) of the parameter, found at flat positions [flat_begin, flat_begin + end - begin).
struct FlatPiece {
  std::size_t param = 0;
  std::int64_t begin = 0, end = 0;
  std::int64_t flat_begin = 0;
};

// Pieces in flat order; parameters must not overlap. Empty parameters and padding are skipped.
std::vector<FlatPiece> split_flat_range(const std::vector<FlatParam>& params, std::int64_t lo,
                                        std::int64_t hi);

// Slices of `kind` for [lo, hi), where range_data points at flat element lo (a rank's shard
// buffer of `dtype`). The slices point into range_data.
std::vector<SliceRef> slices_for_flat_range(const std::vector<FlatParam>& params, std::int64_t lo,
                                            std::int64_t hi, std::string_view kind,
                                            const void* range_data, DType dtype);

}  // namespace strata::checkpoint
