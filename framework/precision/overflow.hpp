// Overflow detection for mixed-precision training: does a gradient buffer hold inf or NaN?
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata::precision {

// True if any of the n elements is ±inf or NaN. Checks every element's exponent bits, so it
// does not share DeepSpeed's false positive when finite values merely sum past FLT_MAX.
bool has_inf_or_nan(const float* x, std::size_t n);
// The same for 16-bit storage; dt must be DType::f16 or DType::bf16.
bool has_inf_or_nan(const std::uint16_t* x, std::size_t n, DType dt);

}  // namespace strata::precision
