// Harness cases of the elementwise ops, casts and checks: add, add_inplace, scale_inplace and cast
// in every mix of dtypes, sum_squares, has_inf_or_nan with ±inf and NaN planted.
#include <limits>

#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// 20000 elements: two of the 16-bit path's 16384-element chunks.
OpCase add_case() {
  const Shape s{100, 200};
  return op_case("add",
                 {{"a", s, 'x', normal()}, {"b", s, 'y', normal(3.0)}, {"out", s, 'o', unset()}},
                 {effect("add", {0, 1, 2}, {2}, [](const Tensors& t) { add(t[0], t[1], t[2]); })},
                 product_combos("xyo"));
}

// b has a's element count in another shape.
OpCase add_inplace_case() {
  return op_case(
      "add_inplace",
      {{"a", Shape{100, 200}, 'x', normal()}, {"b", Shape{20000}, 'y', normal(0.01)}},
      {effect("add_inplace", {0, 1}, {0}, [](const Tensors& t) { add_inplace(t[0], t[1]); })},
      product_combos("xy"));
}

OpCase scale_inplace_case() {
  return op_case(
      "scale_inplace", {{"a", Shape{20001}, 'x', normal(3.0)}},
      {effect("scale_inplace", {0}, {0}, [](const Tensors& t) { scale_inplace(t[0], -0.375f); })},
      product_combos("x"));
}

// With values at the edges of the 16-bit ranges: f16's largest finite and the first that rounds
// to inf, beyond f16's range, an f16 subnormal, -0, an f32 subnormal, near f32's largest.
OpCase cast_case() {
  const Init src = planted(normal(3.0), {{0, 65504.0f},
                                         {1, 65520.0f},
                                         {2, 1e5f},
                                         {3, 1e-6f},
                                         {4, -0.0f},
                                         {5, 1e-40f},
                                         {6, -3e38f},
                                         {7, kInf}});
  return op_case("cast", {{"src", Shape{1000}, 'x', src}, {"dst", Shape{1000}, 'y', unset()}},
                 {effect("cast", {0, 1}, {1}, [](const Tensors& t) { cast(t[0], t[1]); })},
                 product_combos("xy"));
}

// Bitwise: 16-bit values are widened exactly.
OpCase sum_squares_case() {
  return op_case(
      "sum_squares", {{"x", Shape{20003}, 'x', normal(3.0)}},
      {scalar_call("sum_squares", {0}, {}, [](const Tensors& t) { return sum_squares(t[0]); })},
      product_combos("x"));
}

// 3 million elements (an odd count: a partial last 16-byte chunk), whole and as an unaligned view
// [1, n - 2) (4 or 2 bytes past the allocation's alignment: the GPU's element-by-element path):
// a multi-block fixed grid whose threads each sum several chunks.
OpCase sum_squares_large_case() {
  constexpr std::int64_t n = 3000001;
  OpCase c = op_case(
      "sum_squares_large", {{"x", Shape{n}, 'x', normal(3.0)}},
      {scalar_call("sum_squares", {0}, {}, [](const Tensors& t) { return sum_squares(t[0]); }),
       scalar_call("sum_squares", {0}, {},
                   [](const Tensors& t) { return sum_squares(t[0].slice(0, 1, n - 2)); })},
      product_combos("x"));
  c.large = true;
  return c;
}

Call inf_or_nan(int i, std::optional<double> expect) {
  Call call = scalar_call("has_inf_or_nan", {i}, {}, [i](const Tensors& t) {
    return has_inf_or_nan(t[static_cast<std::size_t>(i)]) ? 1.0 : 0.0;
  });
  call.expect = expect;
  return call;
}

OpCase has_inf_or_nan_case() {
  return op_case(
      "has_inf_or_nan",
      {
          {"clean", Shape{20003}, 'x', normal(3.0)},
          {"inf_inside", Shape{20003}, 'x', planted(normal(), {{12345, kInf}})},
          {"nan_last", Shape{37}, 'x', planted(normal(), {{36, kNaN}})},
          {"minus_inf_first", Shape{37}, 'x', planted(normal(), {{0, -kInf}})},
          // Finite in f32 and bf16, inf once rounded to f16: the answer follows the tensor's dtype.
          {"beyond_f16", Shape{37}, 'x', planted(normal(), {{17, 1e5f}})},
      },
      {inf_or_nan(0, 0.0), inf_or_nan(1, 1.0), inf_or_nan(2, 1.0), inf_or_nan(3, 1.0),
       inf_or_nan(4, std::nullopt)},
      product_combos("x"));
}

// A million elements with an inf in the last (partial) chunk and a NaN in the middle, each tensor
// checked whole and as unaligned views [1, n - 1) that exclude or include the planted value.
OpCase has_inf_or_nan_large_case() {
  constexpr std::int64_t n = 1000003;
  auto view = [](int i, std::int64_t lo, std::int64_t hi, double expect) {
    Call call = scalar_call("has_inf_or_nan", {i}, {}, [i, lo, hi](const Tensors& t) {
      return has_inf_or_nan(t[static_cast<std::size_t>(i)].slice(0, lo, hi)) ? 1.0 : 0.0;
    });
    call.expect = expect;
    return call;
  };
  OpCase c = op_case("has_inf_or_nan_large",
                     {{"inf_last", Shape{n}, 'x', planted(normal(), {{n - 1, kInf}})},
                      {"nan_middle", Shape{n}, 'x', planted(normal(), {{500001, kNaN}})}},
                     {inf_or_nan(0, 1.0), view(0, 1, n - 1, 0.0), view(0, 1, n, 1.0),
                      inf_or_nan(1, 1.0), view(1, 1, 500001, 0.0), view(1, 3, n, 1.0)},
                     product_combos("x"));
  c.large = true;
  return c;
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  return {add_case(),
          add_inplace_case(),
          scale_inplace_case(),
          cast_case(),
          sum_squares_case(),
          has_inf_or_nan_case(),
          sum_squares_large_case(),
          has_inf_or_nan_large_case()};
}

}  // namespace strata::ops::test
