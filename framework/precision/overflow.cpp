// Inf/NaN scans on exponent bits, in blocks the compiler vectorises, stopping after the first
// block with a hit.
#include "framework/precision/overflow.hpp"

#include <bit>

#include "framework/core/error.hpp"

namespace strata::precision {

namespace {

constexpr std::size_t kBlock = 4096;

// True if some element's exponent field (bits(x) & exp_mask) is all ones: inf or NaN.
template <typename T, typename U>
bool any_exponent_all_ones(const T* x, std::size_t n, U exp_mask) {
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t end = n - b < kBlock ? n : b + kBlock;
    unsigned hit = 0;
    for (std::size_t i = b; i < end; ++i) {
      hit |= static_cast<unsigned>((std::bit_cast<U>(x[i]) & exp_mask) == exp_mask);
    }
    if (hit) return true;
  }
  return false;
}

}  // namespace

bool has_inf_or_nan(const float* x, std::size_t n) {
  STRATA_CHECK(n == 0 || x, "precision", "has_inf_or_nan got a null buffer for {} elements", n);
  return any_exponent_all_ones(x, n, std::uint32_t{0x7f800000u});
}

bool has_inf_or_nan(const std::uint16_t* x, std::size_t n, DType dt) {
  STRATA_CHECK(n == 0 || x, "precision", "has_inf_or_nan got a null buffer for {} elements", n);
  switch (dt) {
    case DType::f16: return any_exponent_all_ones(x, n, std::uint16_t{0x7c00u});
    case DType::bf16: return any_exponent_all_ones(x, n, std::uint16_t{0x7f80u});
    default:
      fail("precision", "has_inf_or_nan on 16-bit storage needs f16 or bf16, got {}",
           dtype_name(dt));
  }
}

}  // namespace strata::precision
