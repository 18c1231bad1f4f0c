// Element types of tensors: floating point for compute and storage, integers for tokens and
// quantised optimizer state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

enum class DType : std::uint8_t { f32, f16, bf16, f64, i8, u8, i16, u16, i32, u32, i64 };

// Bytes per element.
std::size_t dtype_size(DType t);
// Canonical name: "f32", "bf16", ...
std::string_view dtype_name(DType t);
// Parses a name ("f32"/"float32"/"fp32", "bf16"/"bfloat16", "f16"/"fp16"/"float16", "u16", ...).
// Throws UserError on an unknown name.
DType parse_dtype(std::string_view name);
bool is_floating(DType t);

// C++ type → DType.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<std::int8_t> { static constexpr DType value = DType::i8; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct DTypeOf<std::int16_t> { static constexpr DType value = DType::i16; };
template <> struct DTypeOf<std::uint16_t> { static constexpr DType value = DType::u16; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<std::uint32_t> { static constexpr DType value = DType::u32; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::i64; };

}  // namespace strata
