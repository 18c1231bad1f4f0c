#include "framework/checkpoint/flat_range.hpp"

#include <algorithm>

#include "framework/core/error.hpp"

namespace strata::checkpoint {

std::vector<FlatPiece> split_flat_range(const std::vector<FlatParam>& params, std::int64_t lo,
                                        std::int64_t hi) {
  STRATA_CHECK(0 <= lo && lo <= hi, "checkpoint", "flat range [{}, {}) is invalid", lo, hi);
  std::vector<FlatPiece> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const FlatParam& p = params[i];
    const std::int64_t n = p.shape.numel();
    STRATA_CHECK(p.offset >= 0 && n >= 0, "checkpoint", "{}: offset {} / size {} is invalid",
                 p.name, p.offset, n);
    const std::int64_t a = std::max(lo, p.offset);
    const std::int64_t b = std::min(hi, p.offset + n);
    if (a < b) out.push_back(FlatPiece{i, a - p.offset, b - p.offset, a});
  }
  std::sort(out.begin(), out.end(),
            [](const FlatPiece& x, const FlatPiece& y) { return x.flat_begin < y.flat_begin; });
  for (std::size_t i = 1; i < out.size(); ++i)
    STRATA_CHECK(out[i].flat_begin >= out[i - 1].flat_begin + (out[i - 1].end - out[i - 1].begin),
                 "checkpoint", "parameters {} and {} overlap in the flat buffer",
                 params[out[i - 1].param].name, params[out[i].param].name);
  return out;
}

std::vector<SliceRef> slices_for_flat_range(const std::vector<FlatParam>& params, std::int64_t lo,
                                            std::int64_t hi, std::string_view kind,
                                            const void* range_data, DType dtype) {
  std::vector<SliceRef> out;
  const auto* base = static_cast<const unsigned char*>(range_data);
  for (const FlatPiece& piece : split_flat_range(params, lo, hi)) {
    const FlatParam& p = params[piece.param];
    out.push_back(
        SliceRef{std::string(kind), p.name, p.shape, dtype, piece.begin, piece.end,
                 base + static_cast<std::size_t>(piece.flat_begin - lo) * dtype_size(dtype)});
  }
  return out;
}

}  // namespace strata::checkpoint
