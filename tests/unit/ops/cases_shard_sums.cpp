// Harness cases of Adafactor's and LAMB's kernels and sum_squares_add (the updates whose
// statistics are summed over ZeRO shards). Their sums are f64 tensors, which the harness does not
// hold: each call makes them on the operands' device, runs the op, and returns what it summed as
// the call's scalar (bitwise on the CPU; within the other backends' scalar tolerance). A matrix is
// seen through a range that starts and ends inside rows (a slice boundary), as a shard owns it.
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

// A 37 x 29 matrix seen through [first, first + kRange): from the middle of row 1 to its end (so
// that a range one longer does not fit; test_cuda_emu's ranges also end inside rows).
constexpr std::int64_t kRows = 37, kCols = 29, kFirst = kCols + 11;
constexpr std::int64_t kRange = kRows * kCols - kFirst;
constexpr std::int64_t kVec = 1003;

// The device the sums of a call go to: the operands' (the host's when some operand is there:
// the argument checks put one operand on another device, which the op must refuse).
Device where(const Tensors& t, std::initializer_list<int> args) {
  for (int i : args)
    if (!t[static_cast<std::size_t>(i)].device().is_cuda()) return t[static_cast<std::size_t>(i)].device();
  return t[static_cast<std::size_t>(*args.begin())].device();
}
// n f64 values base + k·i on `d`.
Tensor sums_on(Device d, std::int64_t n, double base = 0.0, double k = 0.0) {
  Tensor h = Tensor::zeros(Shape{n}, DType::f64);
  for (std::int64_t i = 0; i < n; ++i) h.data<double>()[i] = base + k * static_cast<double>(i);
  if (d.is_cpu()) return h;
  TensorOptions o;
  o.device = d;
  Tensor s = Tensor::zeros(Shape{n}, DType::f64, o);
  s.copy_from(h);
  return s;
}
// A checksum of a sums tensor read back to the host: sum of (i + 1)·s[i] (0 on the meta device).
double read(const Tensor& s) {
  if (s.device().is_meta()) return 0.0;
  const Tensor h = s.device().is_cpu() ? s : s.clone(TensorOptions{});
  double c = 0.0;
  for (std::int64_t i = 0; i < h.numel(); ++i) c += static_cast<double>(i + 1) * h.item(i);
  return c;
}

std::vector<Combo> copy_combos() {
  return {{"copy_bf16", {{'h', DType::bf16}}}, {"copy_f16", {{'h', DType::f16}}}};
}

OpCase sum_squares_add_case() {
  return op_case("sum_squares_add", {{"x", Shape{kVec * 40 + 7}, 'p', normal()}},
                 {scalar_call("sum_squares_add", {0}, {}, [](const Tensors& t) {
                   const Tensor out = sums_on(t[0].device(), 1, 0.5);
                   sum_squares_add(t[0], out);
                   return read(out);
                 })});
}

OpCase sq_sums_case() {
  return op_case("adafactor_sq_sums", {{"grad", Shape{kRange}, 'f', normal(0.3)}},
                 {scalar_call("adafactor_sq_sums", {0}, {}, [](const Tensors& t) {
                   const Tensor rows = sums_on(t[0].device(), kRows, 0.25),
                                cols = sums_on(t[0].device(), kCols);
                   adafactor_sq_sums(t[0], kFirst, kRows, kCols, 0.5f, 1e-30f, rows, cols);
                   return read(rows) + 1e3 * read(cols);
                 })});
}

// ema of the row and column statistics from given sums, and the factors of statistics.
OpCase ema_case() {
  return op_case("adafactor_ema", {{"stat", Shape{kRows}, 'f', uniform(0.5, 1.5)}},
                 {effect("adafactor_ema", {0}, {0}, [](const Tensors& t) {
                   adafactor_ema(t[0], sums_on(t[0].device(), kRows, 3.0, 0.37), kCols, 0.75);
                 })});
}

OpCase factors_case() {
  return op_case("adafactor_factors",
                 {{"row", Shape{kRows}, 'f', uniform(0.5, 1.5)},
                  {"col", Shape{kCols}, 'f', uniform(0.5, 1.5)},
                  {"row_factor", Shape{kRows}, 'f', unset()},
                  {"col_factor", Shape{kCols}, 'f', unset()}},
                 {effect("adafactor_factors", {0, 1, 2, 3}, {2, 3}, [](const Tensors& t) {
                   adafactor_factors(t[0], t[1], t[2], t[3]);
                 })});
}

OpCase factored_sumsq_case() {
  return op_case("adafactor_factored_sumsq",
                 {{"grad", Shape{kRange}, 'f', normal(0.3)},
                  {"row_factor", Shape{kRows}, 'f', uniform(0.5, 2.0)},
                  {"col_factor", Shape{kCols}, 'f', uniform(0.5, 2.0)}},
                 {scalar_call("adafactor_factored_sumsq", {0, 1, 2}, {}, [](const Tensors& t) {
                   const Tensor out = sums_on(where(t, {0, 1, 2}), 1, 0.5);
                   adafactor_factored_sumsq(t[0], kFirst, kRows, kCols, 0.5f, t[1], t[2], out);
                   return read(out);
                 })});
}

optim::AdafactorHyper beta1_hyper() {
  optim::AdafactorHyper h;
  h.beta1 = 0.9;
  h.weight_decay = 0.01;
  return h;
}

OpCase apply_factored_case() {
  return op_case("adafactor_apply_factored",
                 {{"param", Shape{kRange}, 'f', normal()},
                  {"grad", Shape{kRange}, 'f', normal(0.3)},
                  {"m", Shape{kRange}, 'f', normal(0.01)},
                  {"row_factor", Shape{kRows}, 'f', uniform(0.5, 2.0)},
                  {"col_factor", Shape{kCols}, 'f', uniform(0.5, 2.0)},
                  {"param16", Shape{kRange}, 'h', unset(), /*copy_of=*/0}},
                 {effect("adafactor_apply_factored", {0, 1, 2, 3, 4, 5}, {0, 2, 5},
                         [](const Tensors& t) {
                           const optim::AdafactorScalars s{0.5f, 0.75, 1.3, 2e-3};
                           adafactor_apply_factored(t[0], t[1], t[2], kFirst, kRows, kCols, t[3], t[4],
                                                    beta1_hyper(), s, t[5]);
                         })},
                 copy_combos());
}

OpCase vector_case() {
  return op_case("adafactor_vector",
                 {{"param", Shape{kVec}, 'f', normal()},
                  {"grad", Shape{kVec}, 'f', normal(0.3)},
                  {"v", Shape{kVec}, 'f', uniform(1e-4, 1e-2)},
                  {"param16", Shape{kVec}, 'h', unset(), /*copy_of=*/0}},
                 {scalar_call("adafactor_vector_sumsq", {1, 2}, {},
                              [](const Tensors& t) {
                                const Tensor out = sums_on(where(t, {1, 2}), 1, 0.5);
                                adafactor_vector_sumsq(t[1], t[2], 0.5f, 1e-30f, 0.75, out);
                                return read(out);
                              }),
                  effect("adafactor_apply_vector", {0, 1, 2, 3}, {0, 2, 3},
                         [](const Tensors& t) {
                           const optim::AdafactorScalars s{0.5f, 0.75, 1.0, 1e-2};
                           adafactor_apply_vector(t[0], t[1], t[2], Tensor(), optim::AdafactorHyper{},
                                                  s, t[3]);
                         })},
                 copy_combos());
}

optim::LambHyper lamb_hyper() {
  optim::LambHyper h;
  h.weight_decay = 0.01;
  return h;
}

OpCase lamb_case() {
  return op_case("lamb",
                 {{"param", Shape{kVec * 20}, 'f', normal()},
                  {"grad", Shape{kVec * 20}, 'f', normal(0.1)},
                  {"m", Shape{kVec * 20}, 'f', normal(0.01)},
                  {"v", Shape{kVec * 20}, 'f', uniform(0.0, 1e-3)},
                  {"param16", Shape{kVec * 20}, 'h', unset(), /*copy_of=*/0}},
                 {scalar_call("lamb_sums", {0, 1, 2, 3}, {},
                              [](const Tensors& t) {
                                const Tensor out = sums_on(where(t, {0, 1, 2, 3}), 2, 1.0);
                                lamb_sums(t[0], t[1], t[2], t[3], lamb_hyper(), 0.5f, out);
                                return read(out);
                              }),
                  effect("lamb_apply", {0, 1, 2, 3, 4}, {0, 2, 3, 4},
                         [](const Tensors& t) {
                           lamb_apply(t[0], t[1], t[2], t[3], lamb_hyper(), 0.5f, 1e-3, 0.8, t[4]);
                         })},
                 copy_combos());
}

// 1-bit Adam's and 1-bit LAMB's compressed-phase kernels: CPU and meta tables only (the CUDA
// table's entries fail until their kernels are written; the jobs refuse these optimizers on a GPU).
constexpr std::int64_t kOneBit = kVec * 20;  // two of the CPU kernels' chunks
const char* const kOneBitNoCuda = "the 1-bit optimizers have no CUDA kernels yet";

OpCase onebit_adam_case() {
  optim::OneBitAdamHyper h;
  h.weight_decay = 0.1;
  OpCase c = op_case("onebit_adam",
                     {{"param", Shape{kOneBit}, 'f', normal()},
                      {"m", Shape{kOneBit}, 'f', normal(0.01)},
                      {"v", Shape{kOneBit}, 'f', uniform(0.0, 1e-3)},
                      {"param16", Shape{kOneBit}, 'h', unset(), /*copy_of=*/0},
                      {"m_in", Shape{kOneBit}, 'f', normal(0.01)},
                      {"grad", Shape{kOneBit}, 'f', normal(0.1)}},
                     {effect("onebit_momentum", {4, 5}, {4},
                             [h](const Tensors& t) { onebit_momentum(t[4], t[5], h, 0.5f); }),
                      effect("onebit_apply", {0, 1, 2, 3}, {0, 3},
                             [h](const Tensors& t) {
                               onebit_apply(t[0], t[1], t[2], h, 1e-3, t[3]);
                             })},
                     copy_combos());
  c.cpu_only = kOneBitNoCuda;
  return c;
}

OpCase onebit_lamb_case() {
  optim::OneBitLambHyper h;
  h.weight_decay = 0.1;
  OpCase c = op_case(
      "onebit_lamb",
      {{"param", Shape{kOneBit}, 'f', normal()},
       {"m", Shape{kOneBit}, 'f', normal(0.01)},
       {"v", Shape{kOneBit}, 'f', uniform(0.0, 1e-3)},
       {"param16", Shape{kOneBit}, 'h', unset(), /*copy_of=*/0},
       {"m_in", Shape{kOneBit}, 'f', normal(0.01)},
       {"m_last_out", Shape{kOneBit}, 'f', unset()},
       {"grad", Shape{kOneBit}, 'f', normal(0.1)},
       {"m_ex", Shape{kOneBit}, 'f', normal(0.01)},
       {"m_last", Shape{kOneBit}, 'f', normal(0.01)},
       {"v_frozen", Shape{kOneBit}, 'f', uniform(1e-6, 1e-3)},
       {"v_fresh", Shape{kOneBit}, 'f', uniform(1e-6, 1e-3)},
       {"param_ex", Shape{kOneBit}, 'f', normal()}},
      {scalar_call("onebit_lamb_sumsq", {1}, {},
                   [](const Tensors& t) {
                     const Tensor out = sums_on(where(t, {1}), 1, 0.5);
                     onebit_lamb_sumsq(t[1], out);
                     return read(out);
                   }),
       effect("onebit_lamb_momentum", {4, 5, 6}, {4, 5},
              [h](const Tensors& t) { onebit_lamb_momentum(t[4], t[5], t[6], h, 0.5f, 1.5); }),
       scalar_call("onebit_lamb_after_exchange", {7, 8, 9, 10, 11}, {7, 10},
                   [h](const Tensors& t) {
                     const Tensor out = sums_on(where(t, {7, 8, 9, 10, 11}), 3);
                     onebit_lamb_after_exchange(t[7], t[8], t[9], t[10], t[11], h, 0.1, 1.5, out);
                     return read(out);
                   }),
       effect("onebit_lamb_apply", {0, 1, 2, 3}, {0, 3},
              [h](const Tensors& t) { onebit_lamb_apply(t[0], t[1], t[2], h, 0.1, 2e-3, t[3]); })},
      copy_combos());
  c.cpu_only = kOneBitNoCuda;
  return c;
}

}  // namespace

std::vector<OpCase> shard_sum_cases() {
  return {sum_squares_add_case(), sq_sums_case(),         ema_case(),
          factors_case(),         factored_sumsq_case(),  apply_factored_case(),
          vector_case(),          lamb_case(),            onebit_adam_case(),
          onebit_lamb_case()};
}

}  // namespace strata::ops::test
