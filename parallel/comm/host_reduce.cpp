#include "parallel/comm/host_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"

namespace strata::parallel {

namespace {

constexpr std::size_t kChunk = 1024;

template <typename T>
void reduce_typed(const void* in, void* inout, std::size_t n, ReduceOp op) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  if (op == ReduceOp::max) {
    for (std::size_t i = 0; i < n; ++i) b[i] = std::max(a[i], b[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<T>(a[i] + b[i]);
  }
}

// bf16/f16: widen chunks to f32 (vectorised), combine, round back.
void reduce_half(const void* in, void* inout, std::size_t n, DType t, ReduceOp op) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  float fa[kChunk], fb[kChunk];
  for (std::size_t off = 0; off < n; off += kChunk) {
    const std::size_t m = std::min(kChunk, n - off);
    if (t == DType::bf16) {
      bf16_to_f32(a + off, fa, m);
      bf16_to_f32(b + off, fb, m);
    } else {
      f16_to_f32(a + off, fa, m);
      f16_to_f32(b + off, fb, m);
    }
    if (op == ReduceOp::max) {
      for (std::size_t i = 0; i < m; ++i) fb[i] = std::max(fa[i], fb[i]);
    } else {
      for (std::size_t i = 0; i < m; ++i) fb[i] += fa[i];
    }
    if (t == DType::bf16)
      f32_to_bf16(fb, b + off, m);
    else
      f32_to_f16(fb, b + off, m);
  }
}

template <typename T>
void divide_typed(void* data, std::size_t n, int d) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_integral_v<T>) {
    using W = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    const W div = static_cast<W>(d);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<W>(p[i]) / div);
  } else {
    const T div = static_cast<T>(d);
    for (std::size_t i = 0; i < n; ++i) p[i] = p[i] / div;
  }
}

}  // namespace

void host_reduce(const void* in, void* inout, std::size_t n, DType t, ReduceOp op) {
  STRATA_CHECK(op != ReduceOp::avg, "comm",
               "host_reduce combines with sum or max; avg is a sum "
               "followed by host_divide");
  switch (t) {
    case DType::f32:
      return reduce_typed<float>(in, inout, n, op);
    case DType::f64:
      return reduce_typed<double>(in, inout, n, op);
    case DType::bf16:
    case DType::f16:
      return reduce_half(in, inout, n, t, op);
    case DType::i8:
      return reduce_typed<std::int8_t>(in, inout, n, op);
    case DType::u8:
      return reduce_typed<std::uint8_t>(in, inout, n, op);
    case DType::i16:
      return reduce_typed<std::int16_t>(in, inout, n, op);
    case DType::u16:
      return reduce_typed<std::uint16_t>(in, inout, n, op);
    case DType::i32:
      return reduce_typed<std::int32_t>(in, inout, n, op);
    case DType::u32:
      return reduce_typed<std::uint32_t>(in, inout, n, op);
    case DType::i64:
      return reduce_typed<std::int64_t>(in, inout, n, op);
  }
}

void host_divide(void* data, std::size_t n, DType t, int d) {
  if (d == 1) return;
  switch (t) {
    case DType::f32:
      return divide_typed<float>(data, n, d);
    case DType::f64:
      return divide_typed<double>(data, n, d);
    case DType::bf16:
    case DType::f16: {
      auto* p = static_cast<std::uint16_t*>(data);
      float f[kChunk];
      const float div = static_cast<float>(d);
      for (std::size_t off = 0; off < n; off += kChunk) {
        const std::size_t m = std::min(kChunk, n - off);
        if (t == DType::bf16)
          bf16_to_f32(p + off, f, m);
        else
          f16_to_f32(p + off, f, m);
        for (std::size_t i = 0; i < m; ++i) f[i] /= div;
        if (t == DType::bf16)
          f32_to_bf16(f, p + off, m);
        else
          f32_to_f16(f, p + off, m);
      }
      return;
    }
    case DType::i8:
      return divide_typed<std::int8_t>(data, n, d);
    case DType::u8:
      return divide_typed<std::uint8_t>(data, n, d);
    case DType::i16:
      return divide_typed<std::int16_t>(data, n, d);
    case DType::u16:
      return divide_typed<std::uint16_t>(data, n, d);
    case DType::i32:
      return divide_typed<std::int32_t>(data, n, d);
    case DType::u32:
      return divide_typed<std::uint32_t>(data, n, d);
    case DType::i64:
      return divide_typed<std::int64_t>(data, n, d);
  }
}

}  // namespace strata::parallel
