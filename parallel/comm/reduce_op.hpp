// The reductions collectives apply element-wise across ranks: sum, avg (sum divided by the
// group size) and max.
#pragma once

#include <cstdint>
#include <string_view>

namespace strata::parallel {

// avg is sum then division by the group size, in the element type: integer types divide with
// truncation toward zero (like C++ `/`), bf16/f16 divide in f32 and round to nearest even.
enum class ReduceOp : std::uint8_t { sum, avg, max };

std::string_view reduce_op_name(ReduceOp op);  // "sum", "avg", "max"

}  // namespace strata::parallel
