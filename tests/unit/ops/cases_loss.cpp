// Harness cases of the cross-entropy ops: whole-vocabulary forward/backward (ignored rows, in-place
// dlogits) and the pieces of a vocabulary-parallel one (row_max, row_sum_exp, target_logit,
// cross_entropy_backward_slice) on a slice [20, 57) of an 80-token vocabulary, and the step that
// combines them once reduced (combine_cross_entropy).
#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

constexpr std::int64_t kSliceStart = 20, kSliceV = 37;

// Targets of the sliced cases: the slice's first and last columns, the columns just outside it,
// others inside and out, an ignored row.
void slice_targets(const Tensor& t) {
  const std::int32_t v[] = {20, -1, 56, 57, 19, 33, 0, 79, 40};
  std::copy(std::begin(v), std::end(v), t.data<std::int32_t>());
}

// 40 rows of a 1001-token vocabulary (the 16-bit path takes 16 rows at a time); rows 1, 5, ...
// are ignored; one logit of 60 needs the max shift.
OpCase cross_entropy_case() {
  OpCase c;
  c.name = "cross_entropy";
  const std::int64_t N = 40, V = 1001;
  c.tensors = {
      {"logits", Shape{N, V}, 'a', planted(normal(3.0), {{5, 60.0f}})},  // 0
      {"targets", Shape{N}, 'i', tokens(V, 4)},                          // 1
      {"lse", Shape{N}, 'f', unset()},                                   // 2
      {"saved_lse", Shape{N}, 'f', unset()},                             // 3 (prepared)
      {"dlogits", Shape{N, V}, 'a', unset()},                            // 4
  };
  c.prepare = [](const Tensors& t) { cross_entropy_forward(t[0], t[1], t[3]); };
  c.calls.push_back(scalar_call("cross_entropy_forward", {0, 1, 2}, {2}, [](const Tensors& t) {
    return cross_entropy_forward(t[0], t[1], t[2]);
  }));
  c.calls.push_back(effect("cross_entropy_backward", {0, 3, 1, 4}, {4}, [](const Tensors& t) {
    cross_entropy_backward(t[0], t[3], t[1], t[4], 1.0f / 30.0f);
  }));
  return c;
}

OpCase cross_entropy_inplace_case() {
  OpCase c;
  c.name = "cross_entropy_backward_in_place";
  const std::int64_t N = 9, V = 37;
  c.tensors = {
      {"logits", Shape{N, V}, 'a', normal(2.0)},  // 0, overwritten by dlogits
      {"targets", Shape{N}, 'i', tokens(V, 4)},   // 1
      {"saved_lse", Shape{N}, 'f', unset()},      // 2 (prepared)
  };
  c.prepare = [](const Tensors& t) { cross_entropy_forward(t[0], t[1], t[2]); };
  c.calls.push_back(effect("cross_entropy_backward", {0, 2, 1}, {0}, [](const Tensors& t) {
    cross_entropy_backward(t[0], t[2], t[1], t[0], 0.125f);
  }));
  return c;
}

// A realistic row width for the GPU paths (one block per row, each thread striding over ~20
// columns with a tail): 8 rows of a 5000-token vocabulary, rows 1, 4 and 7 ignored, the targets of
// rows 0 and 2 on the last and first columns, one logit of 40 that needs the max shift.
OpCase cross_entropy_wide_case() {
  OpCase c;
  c.name = "cross_entropy_wide";
  c.large = true;
  const std::int64_t N = 8, V = 5000;
  c.tensors = {
      {"logits", Shape{N, V}, 'a', planted(normal(2.0), {{3 * V + 4321, 40.0f}})},  // 0
      {"targets", Shape{N}, 'i', tokens(V, 3)},                                     // 1
      {"lse", Shape{N}, 'f', unset()},                                              // 2
      {"saved_lse", Shape{N}, 'f', unset()},                                        // 3
      {"dlogits", Shape{N, V}, 'a', unset()},                                       // 4
  };
  c.prepare = [V](const Tensors& t) {
    std::int32_t* tg = t[1].data<std::int32_t>();
    tg[0] = static_cast<std::int32_t>(V - 1);
    tg[2] = 0;
    cross_entropy_forward(t[0], t[1], t[3]);
  };
  c.calls.push_back(scalar_call("cross_entropy_forward", {0, 1, 2}, {2}, [](const Tensors& t) {
    return cross_entropy_forward(t[0], t[1], t[2]);
  }));
  c.calls.push_back(effect("cross_entropy_backward", {0, 3, 1, 4}, {4}, [](const Tensors& t) {
    cross_entropy_backward(t[0], t[3], t[1], t[4], 1.0f / 5.0f);
  }));
  return c;
}

OpCase row_max_case() {
  return op_case("row_max",
                 {{"logits", Shape{9, kSliceV}, 'a', normal(3.0)}, {"out", Shape{9}, 'f', unset()}},
                 {effect("row_max", {0, 1}, {1}, [](const Tensors& t) { row_max(t[0], t[1]); })});
}

OpCase row_sum_exp_case() {
  return op_case("row_sum_exp",
                 {{"logits", Shape{9, kSliceV}, 'a', normal(3.0)},
                  {"max", Shape{9}, 'f', unset()},  // prepared: the rows' max plus up to 2
                  {"out", Shape{9}, 'f', unset()}},
                 {effect("row_sum_exp", {0, 1, 2}, {2},
                         [](const Tensors& t) { row_sum_exp(t[0], t[1], t[2]); })},
                 {}, [](const Tensors& t) {
                   row_max(t[0], t[1]);
                   float* m = t[1].data<float>();
                   for (int r = 0; r < 9; ++r) m[r] += 0.25f * static_cast<float>(r % 9);
                 });
}

OpCase target_logit_case() {
  return op_case("target_logit",
                 {{"logits", Shape{9, kSliceV}, 'a', normal(3.0)},
                  {"targets", Shape{9}, 'i', tokens(80)},  // prepared: slice_targets
                  {"out", Shape{9}, 'f', unset()}},
                 {effect("target_logit", {0, 1, 2}, {2},
                         [](const Tensors& t) { target_logit(t[0], t[1], kSliceStart, t[2]); })},
                 {}, [](const Tensors& t) { slice_targets(t[1]); });
}

OpCase backward_slice_case() {
  return op_case(
      "cross_entropy_backward_slice",
      {{"logits", Shape{9, kSliceV}, 'a', normal(3.0)},
       {"targets", Shape{9}, 'i', tokens(80)},  // prepared: slice_targets
       {"lse", Shape{9}, 'f', unset()},         // prepared: the slice's own plus 0.7 (the others')
       {"dlogits", Shape{9, kSliceV}, 'a', unset()}},
      {effect("cross_entropy_backward_slice", {0, 2, 1, 3}, {3},
              [](const Tensors& t) {
                cross_entropy_backward_slice(t[0], t[2], t[1], kSliceStart, 0.25f, t[3]);
              })},
      {}, [](const Tensors& t) {
        slice_targets(t[1]);
        Tensor sum = Tensor::empty(Shape{9}, DType::f32);
        row_max(t[0], t[2]);
        row_sum_exp(t[0], t[2], sum);
        float* l = t[2].data<float>();
        for (int r = 0; r < 9; ++r) l[r] += std::log(sum.data<float>()[r]) + 0.7f;
      });
}

// The vocabulary-parallel pieces on a wide slice [4099, 8198) of a 12297-token vocabulary (an odd
// width: every thread of a row block has a different tail), 6 rows: targets on the slice's first
// and last columns, just outside it on both sides, inside, and an ignored row.
OpCase vocab_slice_wide_case() {
  OpCase c;
  c.name = "vocab_slice_wide";
  c.large = true;
  constexpr std::int64_t N = 6, V = 4099, start = 4099;
  c.tensors = {
      {"logits", Shape{N, V}, 'a', planted(normal(3.0), {{2 * V + 17, 30.0f}})},  // 0
      {"targets", Shape{N}, 'i', tokens(3 * V)},                                  // 1 (prepared)
      {"max", Shape{N}, 'f', unset()},           // 2 (prepared: the rows' max plus up to 1.25)
      {"lse", Shape{N}, 'f', unset()},           // 3 (prepared: the slice's own plus 0.7)
      {"row_max", Shape{N}, 'f', unset()},       // 4
      {"sum_exp", Shape{N}, 'f', unset()},       // 5
      {"target_logit", Shape{N}, 'f', unset()},  // 6
      {"dlogits", Shape{N, V}, 'a', unset()},    // 7
  };
  c.prepare = [](const Tensors& t) {
    const std::int32_t tg[N] = {start, start + V - 1, start - 1, start + V, -1, start + 1234};
    std::copy(std::begin(tg), std::end(tg), t[1].data<std::int32_t>());
    row_max(t[0], t[2]);
    Tensor sum = Tensor::empty(Shape{N}, DType::f32);
    row_sum_exp(t[0], t[2], sum);
    float* m = t[2].data<float>();
    float* l = t[3].data<float>();
    for (int r = 0; r < N; ++r) {
      l[r] = m[r] + std::log(sum.data<float>()[r]) + 0.7f;
      m[r] += 0.25f * static_cast<float>(r);
    }
  };
  c.calls.push_back(effect("row_max", {0, 4}, {4}, [](const Tensors& t) { row_max(t[0], t[4]); }));
  c.calls.push_back(effect("row_sum_exp", {0, 2, 5}, {5},
                           [](const Tensors& t) { row_sum_exp(t[0], t[2], t[5]); }));
  c.calls.push_back(effect("target_logit", {0, 1, 6}, {6},
                           [](const Tensors& t) { target_logit(t[0], t[1], start, t[6]); }));
  c.calls.push_back(effect("cross_entropy_backward_slice", {0, 3, 1, 7}, {7}, [](const Tensors& t) {
    cross_entropy_backward_slice(t[0], t[3], t[1], start, 0.5f, t[7]);
  }));
  return c;
}

// The vocabulary-parallel last step on pieces already reduced over the slices: 300 rows (more than
// the CUDA summing block's 256 threads), every third target ignored, sums of exponentials from 1
// (a row whose max is its only term) to 40.
OpCase combine_cross_entropy_case() {
  constexpr std::int64_t N = 300;
  return op_case("combine_cross_entropy",
                 {{"max", Shape{N}, 'f', normal(3.0)},
                  {"sum_exp", Shape{N}, 'f', planted(uniform(1.0, 40.0), {{7, 1.0f}})},
                  {"target", Shape{N}, 'f', normal(3.0)},
                  {"targets", Shape{N}, 'i', tokens(80, 3)},
                  {"lse", Shape{N}, 'f', unset()}},
                 {scalar_call("combine_cross_entropy", {0, 1, 2, 3, 4}, {4}, [](const Tensors& t) {
                   return combine_cross_entropy(t[0], t[1], t[2], t[3], t[4]);
                 })});
}

}  // namespace

std::vector<OpCase> loss_cases() {
  return {cross_entropy_case(),      cross_entropy_inplace_case(), row_max_case(),
          row_sum_exp_case(),        target_logit_case(),          backward_slice_case(),
          cross_entropy_wide_case(), vocab_slice_wide_case(),       combine_cross_entropy_case()};
}

}  // namespace strata::ops::test
