// gemm.cu's kernels around the cuBLASLt products (the products themselves are host calls into
// cuBLASLt, gemm_op.cpp, and are not emulated): the bias broadcast over rows (exact) and the
// column sums that linear_backward adds into db (f32 sums in a fixed order, added into the old
// value and rounded once), against a double reference, over every strip plan shape.
#include <cmath>

#include "framework/backend/cuda/ops/gemm.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

EMU_TEST("gemm", bias_rows) {
  std::mt19937 g(71);
  for (const auto& shape : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 5}, {7, 256},
                            {5, 257}, {300, 3}, {2, 1000}})
    for (DT dd : kFloatDTs)
      for (DT bd : kFloatDTs) {
        const std::int64_t rows = shape.first, cols = shape.second;
        const HostArr bias = random_arr(bd, cols, g);
        HostArr ref(dd, rows * cols);
        for (std::int64_t i = 0; i < rows * cols; ++i) ref.set(i, bias.get(i % cols));
        const std::string what = fmt("bias_rows %lldx%lld bias %s -> %s", static_cast<long long>(rows),
                                     static_cast<long long>(cols), name(bd), name(dd));
        const auto out = run_orders(what, [&] {
          DevBuf db(bias), d(static_cast<std::size_t>(rows * cols) * size_of(dd));
          launch_bias_rows(d.get(), dd, db.get(), bd, rows, cols, nullptr);
          expect_ok(what);
          return d.raw();
        });
        expect_bits(what, arr_from(out, 0, dd, rows * cols), ref);
      }
  launch_bias_rows(nullptr, DT::f32, nullptr, DT::f32, 0, 5, nullptr);
  launch_bias_rows(nullptr, DT::f32, nullptr, DT::f32, 5, 0, nullptr);
  expect_ok("bias_rows of nothing");
}

EMU_TEST("gemm", column_sums) {
  std::mt19937 g(72);
  // Plans: one strip of few rows; rows not a multiple of the 8 row lanes; columns not a multiple
  // of 32; many column blocks (1024 / blocks strips); the 64-rows-a-strip floor; a long strip.
  for (const auto& shape : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 5}, {9, 33},
                            {64, 32}, {65, 31}, {1000, 3}, {130, 700}, {5000, 40}, {2, 40000}})
    for (DT dd : kFloatDTs)
      for (DT xd : kFloatDTs) {
        const std::int64_t rows = shape.first, cols = shape.second;
        if ((rows * cols > 20000) && (dd != xd)) continue;
        const ColumnSumPlan p = column_sum_plan(rows, cols);
        checked();
        if (p.strips < 1 || p.strips > 1024 || p.rows_per_strip * p.strips < rows ||
            p.rows_per_strip * (p.strips - 1) >= rows)
          fail("column_sum_plan(%lld, %lld) = %lld strips of %lld rows", static_cast<long long>(rows),
               static_cast<long long>(cols), static_cast<long long>(p.strips),
               static_cast<long long>(p.rows_per_strip));
        const HostArr x = random_arr(xd, rows * cols, g), old = random_arr(dd, cols, g);
        std::vector<double> ref(static_cast<std::size_t>(cols)), tol(static_cast<std::size_t>(cols));
        for (std::int64_t c = 0; c < cols; ++c) {
          double s = 0, a = 0;
          for (std::int64_t r = 0; r < rows; ++r) {
            s += x.get(r * cols + c);
            a += std::fabs(x.get(r * cols + c));
          }
          ref[static_cast<std::size_t>(c)] = old.get(c) + s;
          // f32 sums of `rows` terms in some order, then one f32 addition: a few ulps of the sum
          // of magnitudes.
          tol[static_cast<std::size_t>(c)] = 4e-7 * (a + std::fabs(old.get(c))) * (1 + std::sqrt(static_cast<double>(rows)) / 4);
        }
        const std::string what = fmt("column_sums %lldx%lld x %s -> dst %s (%lld strips)",
                                     static_cast<long long>(rows), static_cast<long long>(cols),
                                     name(xd), name(dd), static_cast<long long>(p.strips));
        const auto out = run_orders(what, [&] {
          DevBuf dx(x), dst(old), scratch(static_cast<std::size_t>(p.strips * cols) * 4);
          launch_column_sums(dst.get(), dd, dx.get(), xd, rows, cols, scratch.as<float>(), nullptr);
          expect_ok(what);
          return dst.raw();
        }, rows * cols > 20000 ? 2 : 3);
        expect_within(what, arr_from(out, 0, dd, cols), ref, tol);
      }
  // No rows or no columns: dst += 0, nothing launched, no scratch.
  HostArr one(DT::bf16, 4);
  for (int i = 0; i < 4; ++i) one.set(i, 1.5f);
  DevBuf dst(one);
  launch_column_sums(dst.get(), DT::bf16, nullptr, DT::f32, 0, 4, nullptr, nullptr);
  expect_ok("column_sums of no rows");
  expect_bits("column_sums of no rows", dst.download(DT::bf16, 4), one);
}

}  // namespace
}  // namespace cuda_emu_test
