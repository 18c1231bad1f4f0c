// Scalar fallback; replaced by the vectorised implementation.
#include "framework/core/convert.hpp"

#include <cstring>

#include "framework/core/error.hpp"
#include "framework/core/half.hpp"

namespace strata {

void f32_to_bf16(const float* s, std::uint16_t* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
}
void bf16_to_f32(const std::uint16_t* s, float* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
}
void f32_to_f16(const float* s, std::uint16_t* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_f16(s[i]);
}
void f16_to_f32(const std::uint16_t* s, float* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = f16_to_f32(s[i]);
}

namespace {
template <typename T>
double load(const void* p, std::size_t i) {
  return static_cast<double>(static_cast<const T*>(p)[i]);
}
double load_any(const void* p, DType t, std::size_t i) {
  switch (t) {
    case DType::f32: return load<float>(p, i);
    case DType::f64: return load<double>(p, i);
    case DType::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::f16: return f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::i8: return load<std::int8_t>(p, i);
    case DType::u8: return load<std::uint8_t>(p, i);
    case DType::i16: return load<std::int16_t>(p, i);
    case DType::u16: return load<std::uint16_t>(p, i);
    case DType::i32: return load<std::int32_t>(p, i);
    case DType::u32: return load<std::uint32_t>(p, i);
    case DType::i64: return load<std::int64_t>(p, i);
  }
  return 0;
}
void store_any(void* p, DType t, std::size_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(p)[i] = v; return;
    case DType::bf16: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); return;
    case DType::f16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); return;
    case DType::i8: static_cast<std::int8_t*>(p)[i] = static_cast<std::int8_t>(v); return;
    case DType::u8: static_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(v); return;
    case DType::i16: static_cast<std::int16_t*>(p)[i] = static_cast<std::int16_t>(v); return;
    case DType::u16: static_cast<std::uint16_t*>(p)[i] = static_cast<std::uint16_t>(v); return;
    case DType::i32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); return;
    case DType::u32: static_cast<std::uint32_t*>(p)[i] = static_cast<std::uint32_t>(v); return;
    case DType::i64: static_cast<std::int64_t*>(p)[i] = static_cast<std::int64_t>(v); return;
  }
}
}  // namespace

void convert(const void* src, DType st, void* dst, DType dt, std::size_t n) {
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
  if (st == DType::f32 && dt == DType::bf16)
    return f32_to_bf16(static_cast<const float*>(src), static_cast<std::uint16_t*>(dst), n);
  if (st == DType::bf16 && dt == DType::f32)
    return bf16_to_f32(static_cast<const std::uint16_t*>(src), static_cast<float*>(dst), n);
  if (st == DType::f32 && dt == DType::f16)
    return f32_to_f16(static_cast<const float*>(src), static_cast<std::uint16_t*>(dst), n);
  if (st == DType::f16 && dt == DType::f32)
    return f16_to_f32(static_cast<const std::uint16_t*>(src), static_cast<float*>(dst), n);
  for (std::size_t i = 0; i < n; ++i) store_any(dst, dt, i, load_any(src, st, i));
}

const char* convert_simd_path() { return "scalar"; }

}  // namespace strata
