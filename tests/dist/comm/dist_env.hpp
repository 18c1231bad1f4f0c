// Shared helpers of the multi-rank communication tests: the world group, per-rank input values
// whose reductions are exact in every dtype, and typed buffers read back as doubles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/core/convert.hpp"
#include "framework/core/half.hpp"
#include "framework/core/tensor.hpp"
#include "parallel/comm/group.hpp"

namespace strata::test {

// The world group the test main initialised.
const parallel::Group& world();
void set_world(const parallel::Group& g);

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                       DType::i8,  DType::u8,  DType::i16,  DType::u16,
                                       DType::i32, DType::u32, DType::i64};
  return d;
}

inline bool is_unsigned(DType t) {
  return t == DType::u8 || t == DType::u16 || t == DType::u32;
}

// What rank r contributes at element i: small integers (|sum| <= 36 over 4 ranks), so sums are
// exact in every dtype including i8, bf16 and f16.
inline double value(DType t, int r, std::size_t i) {
  const int base = static_cast<int>(i % 13);
  return is_unsigned(t) ? base + r : base - 6 + r;
}

// Rounds a double to what the dtype stores (exact for the integers used here).
inline double as_stored(DType t, double v) {
  switch (t) {
    case DType::f32:
      return static_cast<float>(v);
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    case DType::f16:
      return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    default:
      return v;
  }
}

// The documented avg: integers divide with truncation toward zero, f32/f64 in their own type,
// bf16/f16 in f32 then rounded.
inline double expected_avg(DType t, double sum, int n) {
  switch (t) {
    case DType::f32:
    case DType::bf16:
    case DType::f16:
      return as_stored(t, static_cast<float>(sum) / static_cast<float>(n));
    case DType::f64:
      return sum / n;
    default:
      return static_cast<double>(static_cast<std::int64_t>(sum) / n);
  }
}

// A CPU tensor of dtype t holding f(i) for i in [0, n).
template <typename F>
Tensor make(DType t, std::size_t n, F&& f) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = f(i);
  Tensor out = Tensor::empty(Shape{static_cast<std::int64_t>(n)}, t);
  if (n) convert(v.data(), DType::f64, out.raw(), t, n);
  return out;
}

inline std::vector<double> read(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  if (!v.empty()) convert(t.raw(), t.dtype(), v.data(), DType::f64, v.size());
  return v;
}

// "" when got[i] == want(i) for every i, else the first mismatch.
template <typename F>
std::string mismatch(const std::vector<double>& got, F&& want) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want(i))
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " +
             std::to_string(want(i));
  return {};
}

}  // namespace strata::test
