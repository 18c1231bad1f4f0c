// Bulk element-type conversion between buffers (vectorised for f32 ↔ bf16/f16, with
// round-to-nearest-even), used by Tensor::copy_from, mixed precision and communication.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata {

void f32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n);
void bf16_to_f32(const std::uint16_t* src, float* dst, std::size_t n);
void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n);
void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n);

// Converts n contiguous elements of any dtype to any other. Float → integer truncates toward
// zero (like a C cast); same dtype is a memcpy. src and dst must not overlap.
void convert(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n);

// Which SIMD path the bulk conversions use on this CPU ("avx512", "avx2+f16c", "scalar").
const char* convert_simd_path();

}  // namespace strata
