#include "framework/core/dtype.hpp"

#include "framework/core/error.hpp"

namespace strata {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::i8: return 1;
    case DType::u8: return 1;
    case DType::i16: return 2;
    case DType::u16: return 2;
    case DType::i32: return 4;
    case DType::u32: return 4;
    case DType::i64: return 8;
  }
  fail("core", "invalid dtype {}", static_cast<int>(t));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i16: return "i16";
    case DType::u16: return "u16";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::i64: return "i64";
  }
  return "?";
}

DType parse_dtype(std::string_view n) {
  if (n == "f32" || n == "fp32" || n == "float32" || n == "float") return DType::f32;
  if (n == "f16" || n == "fp16" || n == "float16" || n == "half") return DType::f16;
  if (n == "bf16" || n == "bfloat16") return DType::bf16;
  if (n == "f64" || n == "fp64" || n == "float64" || n == "double") return DType::f64;
  if (n == "i8" || n == "int8") return DType::i8;
  if (n == "u8" || n == "uint8") return DType::u8;
  if (n == "i16" || n == "int16") return DType::i16;
  if (n == "u16" || n == "uint16") return DType::u16;
  if (n == "i32" || n == "int32") return DType::i32;
  if (n == "u32" || n == "uint32") return DType::u32;
  if (n == "i64" || n == "int64") return DType::i64;
  user_fail("core", "unknown dtype '{}' (expected one of f32, f16, bf16, f64, i8, u8, i16, u16, "
            "i32, u32, i64)", n);
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}

}  // namespace strata
