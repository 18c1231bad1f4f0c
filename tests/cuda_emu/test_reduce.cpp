// reduce.cu: the sum of squares (against the CPU's and an exact sum; the same bits whether x is
// 16-byte aligned or not, as reduce.hpp promises) and the inf/NaN check (against
// precision::has_inf_or_nan), every dtype, tails of every length, the 1024-block cap.
#include <cmath>
#include <cstring>
#include <limits>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cuda/ops/reduce.hpp"
#include "framework/precision/overflow.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

// sum of squares of the widened values, exactly enough (long double, then the error of the
// double result checked relative to it).
long double exact_sum_squares(const HostArr& x) {
  long double s = 0;
  for (std::int64_t i = 0; i < x.n; ++i) {
    const long double v = x.get(i);
    s += v * v;
  }
  return s;
}

// Runs launch_sum_squares on x placed `offset` elements into a device buffer.
double gpu_sum_squares(const HostArr& x, std::int64_t offset, const std::string& what, int orders) {
  const std::size_t es = size_of(x.dt);
  const auto out = run_orders(
      what,
      [&] {
        DevBuf buf(static_cast<std::size_t>(x.n + offset) * es);
        buf.upload(x, static_cast<std::size_t>(offset) * es);
        DevBuf parts(static_cast<std::size_t>(sum_squares_partials(x.n, x.dt)) * 8), res(8);
        launch_sum_squares(static_cast<char*>(buf.get()) + offset * es, x.dt, x.n,
                           parts.as<double>(), res.as<double>(), nullptr);
        expect_ok(what);
        return res.raw();
      },
      orders);
  double r;
  std::memcpy(&r, out.data(), 8);
  return r;
}

EMU_TEST("reduce", sum_squares) {
  std::mt19937 g(51);
  for (DT d : kFloatDTs)
    for (std::int64_t n : {1, 3, 4, 5, 7, 8, 9, 15, 17, 255, 1024, 1025, 4099, 70001}) {
      const HostArr x = random_arr(d, n, g, 2.0f);
      const double cpu = d == DT::f32
                             ? strata::cpu::sum_squares(static_cast<const float*>(x.data()), static_cast<std::size_t>(n))
                             : strata::cpu::sum_squares(static_cast<const std::uint16_t*>(x.data()), dtype(d), static_cast<std::size_t>(n));
      const long double exact = exact_sum_squares(x);
      const std::string what = fmt("sum_squares %s n=%lld", name(d), static_cast<long long>(n));
      const double aligned = gpu_sum_squares(x, 0, what + " aligned", 3);
      const double unaligned = gpu_sum_squares(x, 1, what + " unaligned", 2);
      expect_close(what + " vs exact", aligned, static_cast<double>(exact), 1e-14);
      expect_close(what + " vs the CPU's", aligned, cpu, 1e-14);
      checked();
      if (std::memcmp(&aligned, &unaligned, 8) != 0)
        fail("%s: %.17g aligned, %.17g unaligned (the same bits promised)", what.c_str(), aligned,
             unaligned);
    }
  // Values over a wide range of magnitudes: the double sum of 16-bit squares rounds (with values
  // of one magnitude it is exact, and the order of the terms could not show), so the vector and
  // the scalar paths must take the elements in the same order to agree.
  for (DT d : kFloatDTs)
    for (std::int64_t n : {64, 4099, 70001}) {
      HostArr x(d, n);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      const int lo = d == DT::f16 ? -12 : -20, hi = d == DT::f16 ? 7 : 20;
      std::uniform_int_distribution<int> ex(lo, hi);
      for (std::int64_t i = 0; i < n; ++i) x.set(i, std::ldexp(nd(g), ex(g)));
      const std::string what = fmt("sum_squares %s n=%lld wide range", name(d), static_cast<long long>(n));
      const double aligned = gpu_sum_squares(x, 0, what + " aligned", 2);
      const double unaligned = gpu_sum_squares(x, 1, what + " unaligned", 1);
      expect_close(what + " vs exact", aligned, static_cast<double>(exact_sum_squares(x)), 1e-14);
      checked();
      if (std::memcmp(&aligned, &unaligned, 8) != 0)
        fail("%s: %.17g aligned, %.17g unaligned (the same bits promised)", what.c_str(), aligned,
             unaligned);
    }
  // One 16-byte chunk (one thread) at a time: there a different order of the chunk's elements
  // shows in the result (about one draw in 25 rounds differently).
  for (DT d : {DT::bf16, DT::f16})
    for (int draw = 0; draw < 200; ++draw) {
      HostArr x(d, 8);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::uniform_int_distribution<int> ex(d == DT::f16 ? -12 : -20, d == DT::f16 ? 7 : 20);
      for (std::int64_t i = 0; i < 8; ++i) x.set(i, std::ldexp(nd(g), ex(g)));
      const std::string what = fmt("sum_squares %s one chunk, draw %d", name(d), draw);
      const double aligned = gpu_sum_squares(x, 0, what + " aligned", 1);
      const double unaligned = gpu_sum_squares(x, 1, what + " unaligned", 1);
      checked();
      if (std::memcmp(&aligned, &unaligned, 8) != 0)
        fail("%s: %.17g aligned, %.17g unaligned (the same bits promised)", what.c_str(), aligned,
             unaligned);
    }
  // Past the 1024-block cap (1024 blocks x 256 threads x 4 f32 per chunk): threads take several
  // chunks each.
  const std::int64_t n = 1024LL * 256 * 4 + 4 * 300 + 3;
  const HostArr x = random_arr(DT::f32, n, g);
  const double r = gpu_sum_squares(x, 0, "sum_squares f32 past the block cap", 2);
  expect_close("sum_squares f32 past the block cap", r, static_cast<double>(exact_sum_squares(x)), 1e-13);
  checked();
  if (sum_squares_partials(n, DT::f32) != 1024) fail("partials past the cap: %lld", static_cast<long long>(sum_squares_partials(n, DT::f32)));
  // n = 0: one block writes a zero partial; the result is 0.
  DevBuf parts(static_cast<std::size_t>(sum_squares_partials(0, DT::f32)) * 8), res(8), dummy(16);
  launch_sum_squares(dummy.get(), DT::f32, 0, parts.as<double>(), res.as<double>(), nullptr);
  expect_ok("sum_squares n=0");
  double z = -1;
  res.download(&z, 8);
  checked();
  if (z != 0.0) fail("sum_squares n=0 = %g", z);
}

bool ref_has_inf_or_nan(const HostArr& x) {
  if (x.dt == DT::f32)
    return strata::precision::has_inf_or_nan(static_cast<const float*>(x.data()), static_cast<std::size_t>(x.n));
  return strata::precision::has_inf_or_nan(static_cast<const std::uint16_t*>(x.data()),
                                           static_cast<std::size_t>(x.n), dtype(x.dt));
}

EMU_TEST("reduce", has_inf_or_nan) {
  std::mt19937 g(52);
  const float inf = std::numeric_limits<float>::infinity();
  for (DT d : kFloatDTs)
    for (std::int64_t n : {1, 3, 7, 8, 9, 16, 17, 1000, 4099})
      for (int where = 0; where < 5; ++where)  // none, first, last, middle, the last whole chunk
        for (float bad : {inf, -inf, std::nanf("")})
          for (std::int64_t offset : {0, 1}) {
            if (where == 0 && bad != inf) continue;
            HostArr x = random_arr(d, n, g, 100.0f);
            // Large finite values: 1e5 is finite in f32 and bf16 but inf as f16 (written as f16's
            // max, so that only the planted value is non-finite).
            for (std::int64_t i = 0; i < n; i += 5) x.set(i, d == DT::f16 ? 65504.0f : 1e5f);
            const std::int64_t per = d == DT::f32 ? 4 : 8;
            const std::int64_t at = where == 1 ? 0 : where == 2 ? n - 1 : where == 3 ? n / 2
                                                                       : std::max<std::int64_t>(0, (n / per) * per - 1);
            if (where) x.set(at, bad);
            const bool want = ref_has_inf_or_nan(x);
            checked();
            if (want != (where != 0)) fail("reference disagrees with the planted value");
            const std::string what = fmt("has_inf_or_nan %s n=%lld at %lld (%g)%s", name(d),
                                         static_cast<long long>(n), static_cast<long long>(where ? at : -1),
                                         bad, offset ? " unaligned" : "");
            const auto out = run_orders(what, [&] {
              const std::size_t es = size_of(d);
              DevBuf buf(static_cast<std::size_t>(n + offset) * es), flag(4);
              buf.upload(x, static_cast<std::size_t>(offset) * es);
              expect_ok(what + " memset", cudaMemsetAsync(flag.get(), 0, 4, nullptr));
              launch_has_inf_or_nan(static_cast<char*>(buf.get()) + offset * es, d, n,
                                    flag.as<int>(), nullptr);
              expect_ok(what);
              return flag.raw();
            }, n > 1000 ? 2 : 3);
            int f;
            std::memcpy(&f, out.data(), 4);
            checked();
            if ((f != 0) != want || (f != 0 && f != 1)) fail("%s: flag %d, expected %d", what.c_str(), f, want);
          }
  // f16 65520 rounds to inf when stored: the check looks at the stored bits.
  HostArr h(DT::f16, 3);
  h.set(0, 1.0f);
  h.set(1, 65520.0f);
  h.set(2, 2.0f);
  DevBuf buf(h), flag(4);
  cudaMemsetAsync(flag.get(), 0, 4, nullptr);
  launch_has_inf_or_nan(buf.get(), DT::f16, 3, flag.as<int>(), nullptr);
  expect_ok("has_inf_or_nan f16 65520");
  int f = 0;
  flag.download(&f, 4);
  checked();
  if (f != 1) fail("has_inf_or_nan: f16 65520 (inf) not found");
  // n = 0 leaves the flag alone.
  cudaMemsetAsync(flag.get(), 0x7f, 4, nullptr);
  launch_has_inf_or_nan(buf.get(), DT::f16, 0, flag.as<int>(), nullptr);
  expect_ok("has_inf_or_nan n=0");
  flag.download(&f, 4);
  checked();
  if (f != 0x7f7f7f7f) fail("has_inf_or_nan n=0 touched the flag");
}

}  // namespace
}  // namespace cuda_emu_test
