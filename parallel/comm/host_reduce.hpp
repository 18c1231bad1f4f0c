// Element-wise reductions on host memory that transports need beyond what the wire library
// offers: bf16/f16 sum and max (through f32, rounded to nearest even), and avg's final division.
#pragma once

#include <cstddef>

#include "framework/core/dtype.hpp"
#include "parallel/comm/reduce_op.hpp"

namespace strata::parallel {

// inout[i] = op(in[i], inout[i]) for op sum or max. For bf16/f16 each element is widened to
// f32, combined, and rounded back to nearest even.
void host_reduce(const void* in, void* inout, std::size_t n, DType t, ReduceOp op);

// data[i] /= divisor: integers truncate toward zero, f32/f64 divide in their own type, bf16/f16
// divide in f32 and round to nearest even.
void host_divide(void* data, std::size_t n, DType t, int divisor);

}  // namespace strata::parallel
