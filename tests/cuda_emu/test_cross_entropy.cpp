// cross_entropy.cu against the CPU's mixed-dtype cross-entropy (backend/cpu/cross_entropy.cpp):
// the forward (lse, the total loss in double, the first target >= V reported), the backward on
// the whole vocabulary and on slices (dlogits == logits too), row_max and target_logit (bitwise),
// row_sum_exp, and the step combining the reduced pieces. Ignored rows (target < 0) everywhere. The CPU's exp is a polynomial within about
// an ulp of expf, so lse and dlogits agree to a few ulps.
#include <cmath>
#include <cstring>
#include <limits>

#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/cuda/ops/cross_entropy.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

struct Shape {
  int N, V;
};
// One column, fewer columns than threads, exactly a block's 256 and one more, long rows, and more
// rows than the summing block's 256 threads.
constexpr Shape kShapes[] = {{1, 1}, {3, 5}, {4, 256}, {5, 257}, {2, 3000}, {300, 7}};

// Targets in [0, V) with some ignored rows (negative: -1 and -100).
std::vector<std::int32_t> targets_for(int N, std::int64_t V, std::mt19937& g) {
  std::uniform_int_distribution<std::int64_t> d(0, V - 1);
  std::vector<std::int32_t> t(static_cast<std::size_t>(N));
  for (int r = 0; r < N; ++r)
    t[static_cast<std::size_t>(r)] =
        r % 5 == 3 ? -1 : r % 7 == 6 ? -100 : static_cast<std::int32_t>(d(g));
  return t;
}

DevBuf dev_of(const void* p, std::size_t bytes) {
  DevBuf d(bytes);
  d.upload(p, bytes);
  return d;
}

std::vector<double> widened(const HostArr& a) {
  std::vector<double> v(static_cast<std::size_t>(a.n));
  for (std::int64_t i = 0; i < a.n; ++i) v[static_cast<std::size_t>(i)] = a.get(i);
  return v;
}

EMU_TEST("cross_entropy", forward) {
  std::mt19937 g(41);
  for (const Shape& s : kShapes)
    for (DT ld : kFloatDTs) {
      if (s.N > 256 && ld == DT::bf16) continue;  // many rows: two dtypes
      const int N = s.N, V = s.V;
      const HostArr x = random_arr(ld, std::int64_t{N} * V, g, 3.0f);
      const std::vector<std::int32_t> tg = targets_for(N, V, g);
      std::vector<float> lse_ref(static_cast<std::size_t>(N));
      const double loss_ref =
          strata::cpu::cross_entropy_forward({x.data(), dtype(ld)}, tg.data(), lse_ref.data(), N, V);
      double loss_abs = 0;  // the scale of the total: sum of |row loss|
      for (int r = 0; r < N; ++r)
        if (tg[static_cast<std::size_t>(r)] >= 0)
          loss_abs += std::fabs(lse_ref[static_cast<std::size_t>(r)] -
                                x.get(std::int64_t{r} * V + tg[static_cast<std::size_t>(r)]));
      const std::string what = fmt("cross_entropy_forward N=%d V=%d %s", N, V, name(ld));
      const auto out = run_orders(what, [&] {
        DevBuf dx(x), dt = dev_of(tg.data(), tg.size() * 4), dl(static_cast<std::size_t>(N) * 4);
        DevBuf rows(static_cast<std::size_t>(N) * 8), sum(8);
        launch_cross_entropy_forward(dx.get(), ld, dt.as<std::int32_t>(), dl.as<float>(),
                                     rows.as<double>(), sum.as<double>(), N, V, nullptr);
        expect_ok(what);
        std::vector<unsigned char> o = dl.raw();
        append(o, sum.raw());
        return o;
      });
      expect_close(what + " lse", arr_from(out, 0, DT::f32, N),
                   std::vector<double>(lse_ref.begin(), lse_ref.end()), 1e-6, 1e-6);
      double sum = 0;
      std::memcpy(&sum, out.data() + 4 * N, sizeof sum);
      expect_close(what + " loss", sum, loss_ref, 0.0, 1e-6 * loss_abs + 1e-12);
    }
}

EMU_TEST("cross_entropy", forward_marks_a_target_out_of_range) {
  std::mt19937 g(42);
  for (const Shape& s : {Shape{3, 5}, Shape{300, 4}}) {
    const int N = s.N, V = s.V;
    const HostArr x = random_arr(DT::f32, std::int64_t{N} * V, g);
    std::vector<std::int32_t> tg = targets_for(N, V, g);
    // Bad targets in rows N-1 and N/2 (and a huge one), or in the last row alone: the sum is
    // NaN (the host, which reads it later, learns of them from it).
    for (const bool both : {true, false}) {
      std::vector<std::int32_t> bad = tg;
      bad[static_cast<std::size_t>(N - 1)] = V;
      if (both) bad[static_cast<std::size_t>(N / 2)] = V + 1000;
      const std::string what =
          fmt("cross_entropy_forward N=%d V=%d bad targets%s", N, V, both ? " (2)" : "");
      const auto out = run_orders(what, [&] {
        DevBuf dx(x), dt = dev_of(bad.data(), bad.size() * 4), dl(static_cast<std::size_t>(N) * 4);
        DevBuf rows(static_cast<std::size_t>(N) * 8), sum(8);
        launch_cross_entropy_forward(dx.get(), DT::f32, dt.as<std::int32_t>(), dl.as<float>(),
                                     rows.as<double>(), sum.as<double>(), N, V, nullptr);
        expect_ok(what);
        return sum.raw();
      });
      double sum = 0;
      std::memcpy(&sum, out.data(), sizeof sum);
      checked();
      if (!std::isnan(sum)) fail("%s: sum %g, expected NaN", what.c_str(), sum);
    }
  }
}

EMU_TEST("cross_entropy", backward_whole_and_slices) {
  std::mt19937 g(43);
  for (const Shape& s : kShapes)
    for (DT ld : kFloatDTs)
      for (DT dd : kFloatDTs)
        for (int mode = 0; mode < 3; ++mode) {  // 0: whole; 1: whole, dlogits == logits; 2: slice
          if (mode == 1 && ld != dd) continue;
          if (s.V >= 3000 && ld != dd) continue;
          const int N = s.N, V = s.V;
          // A slice [start, start + V) of a vocabulary of 3V: targets anywhere in it.
          const std::int64_t start = mode == 2 ? V : 0, total = mode == 2 ? 3 * std::int64_t{V} : V;
          const HostArr x = random_arr(ld, std::int64_t{N} * V, g, 3.0f);
          const std::vector<std::int32_t> tg = targets_for(N, total, g);
          // lse: the CPU forward's of these rows (a slice's would come from the pieces; any
          // value will do, as long as both get the same).
          std::vector<float> lse(static_cast<std::size_t>(N));
          for (int r = 0; r < N; ++r) {
            double m = -INFINITY, sum = 0;
            for (int j = 0; j < V; ++j) m = std::max(m, static_cast<double>(x.get(std::int64_t{r} * V + j)));
            for (int j = 0; j < V; ++j) sum += std::exp(x.get(std::int64_t{r} * V + j) - m);
            lse[static_cast<std::size_t>(r)] = static_cast<float>(m + std::log(sum) + (mode == 2 ? 0.7 : 0.0));
          }
          const float scale = 1.0f / 37.0f;
          HostArr ref(dd, std::int64_t{N} * V);
          strata::cpu::cross_entropy_backward_slice({x.data(), dtype(ld)}, lse.data(), tg.data(),
                                                    start, scale, {ref.data(), dtype(dd)}, N, V);
          const std::string what =
              fmt("cross_entropy_backward N=%d V=%d %s->%s %s", N, V, name(ld), name(dd),
                  mode == 0 ? "whole" : mode == 1 ? "whole, dlogits == logits" : "slice");
          const auto out = run_orders(what, [&] {
            DevBuf dx(x), dt = dev_of(tg.data(), tg.size() * 4), dl = dev_of(lse.data(), lse.size() * 4);
            DevBuf dd_buf(mode == 1 ? 0 : static_cast<std::size_t>(N) * V * size_of(dd));
            void* dlog = mode == 1 ? dx.get() : dd_buf.get();
            launch_cross_entropy_backward(dx.get(), ld, dl.as<float>(), dt.as<std::int32_t>(),
                                          start, scale, dlog, dd, N, V, nullptr);
            expect_ok(what);
            return mode == 1 ? dx.raw() : dd_buf.raw();
          });
          // p * scale - scale at the target cancels: an absolute tolerance of an ulp of scale.
          expect_close(what, arr_from(out, 0, dd, std::int64_t{N} * V), widened(ref), 4e-6,
                       2e-7 * scale);
        }
}

EMU_TEST("cross_entropy", row_max_sum_exp_target_logit) {
  std::mt19937 g(44);
  for (const Shape& s : kShapes)
    for (DT ld : kFloatDTs) {
      if (s.N > 256 && ld == DT::f16) continue;  // many rows: two dtypes
      const int N = s.N, V = s.V;
      const HostArr x = random_arr(ld, std::int64_t{N} * V, g, 3.0f);
      const std::int64_t start = V / 2;  // a slice at V/2 of a vocabulary of 3V
      const std::vector<std::int32_t> tg = targets_for(N, 3 * std::int64_t{V}, g);
      std::vector<float> mref(static_cast<std::size_t>(N)), sref(static_cast<std::size_t>(N)),
          tref(static_cast<std::size_t>(N));
      strata::cpu::row_max({x.data(), dtype(ld)}, mref.data(), N, V);
      strata::cpu::row_sum_exp({x.data(), dtype(ld)}, mref.data(), sref.data(), N, V);
      strata::cpu::target_logit({x.data(), dtype(ld)}, tg.data(), start, tref.data(), N, V);
      const std::string what = fmt("row_max/row_sum_exp/target_logit N=%d V=%d %s", N, V, name(ld));
      const auto out = run_orders(what, [&] {
        DevBuf dx(x), dt = dev_of(tg.data(), tg.size() * 4);
        DevBuf dm(static_cast<std::size_t>(N) * 4), ds(static_cast<std::size_t>(N) * 4),
            dtl(static_cast<std::size_t>(N) * 4);
        launch_row_max(dx.get(), ld, dm.as<float>(), N, V, nullptr);
        expect_ok(what + " row_max");
        launch_row_sum_exp(dx.get(), ld, dm.as<float>(), ds.as<float>(), N, V, nullptr);
        expect_ok(what + " row_sum_exp");
        launch_target_logit(dx.get(), ld, dt.as<std::int32_t>(), start, dtl.as<float>(), N, V, nullptr);
        expect_ok(what + " target_logit");
        std::vector<unsigned char> o = dm.raw();
        append(o, ds.raw());
        append(o, dtl.raw());
        return o;
      });
      HostArr mr(DT::f32, N), tr(DT::f32, N);
      std::memcpy(mr.data(), mref.data(), mref.size() * 4);
      std::memcpy(tr.data(), tref.data(), tref.size() * 4);
      expect_bits(what + " row_max", arr_from(out, 0, DT::f32, N), mr);
      // exp in f32 (expf) summed in double vs exp in double: a few f32 ulps.
      expect_close(what + " row_sum_exp", arr_from(out, 4 * N, DT::f32, N),
                   std::vector<double>(sref.begin(), sref.end()), 1e-6);
      expect_bits(what + " target_logit", arr_from(out, 8 * N, DT::f32, N), tr);
    }
  // A row of no columns: max -inf (cross_entropy.hpp).
  DevBuf dm(3 * 4), dx(4);
  launch_row_max(dx.get(), DT::f32, dm.as<float>(), 3, 0, nullptr);
  expect_ok("row_max V=0");
  const HostArr m = dm.download(DT::f32, 3);
  checked();
  for (int r = 0; r < 3; ++r)
    if (m.get(r) != -std::numeric_limits<float>::infinity()) fail("row_max V=0: %g", m.get(r));
  // N = 0: nothing queued.
  launch_cross_entropy_forward(nullptr, DT::f32, nullptr, nullptr, nullptr, nullptr, 0, 5, nullptr);
  launch_cross_entropy_backward(nullptr, DT::f32, nullptr, nullptr, 0, 1.0f, nullptr, DT::f32, 0, 5, nullptr);
  launch_row_max(nullptr, DT::f32, nullptr, 0, 5, nullptr);
  launch_row_sum_exp(nullptr, DT::f32, nullptr, nullptr, 0, 5, nullptr);
  launch_target_logit(nullptr, DT::f32, nullptr, 0, nullptr, 0, 5, nullptr);
  expect_ok("cross-entropy N=0");
}

// combine_cross_entropy's kernels against the CPU's: lse bitwise (max + logf(sum), one f32
// addition each), the total in double within 1e-12 of the CPU's row-order sum (the summing block
// adds in a fixed tree), rows with ignored targets adding nothing; 1 row, 255 and 257 (either side
// of a block), 700 (several threads' rows in the summing block).
EMU_TEST("cross_entropy", combine_cross_entropy) {
  std::mt19937 g(45);
  std::uniform_real_distribution<float> pos(1.0f, 50.0f), any(-6.0f, 6.0f);
  for (const int N : {1, 255, 257, 700}) {
    std::vector<float> m(static_cast<std::size_t>(N)), s(m.size()), t(m.size()), lref(m.size());
    for (std::size_t r = 0; r < m.size(); ++r) {
      m[r] = any(g);
      s[r] = r == 0 ? 1.0f : pos(g);
      t[r] = any(g);
    }
    const std::vector<std::int32_t> tg = targets_for(N, 50, g);
    const double ref = strata::cpu::combine_cross_entropy(m.data(), s.data(), t.data(), tg.data(),
                                                          lref.data(), N);
    double scale = 0;
    for (int r = 0; r < N; ++r)
      if (tg[static_cast<std::size_t>(r)] >= 0)
        scale += std::abs(static_cast<double>(lref[static_cast<std::size_t>(r)]) - t[static_cast<std::size_t>(r)]);
    const std::string what = fmt("combine_cross_entropy N=%d", N);
    const auto out = run_orders(what, [&] {
      DevBuf dm = dev_of(m.data(), m.size() * 4), ds = dev_of(s.data(), s.size() * 4),
             dt = dev_of(t.data(), t.size() * 4), dtg = dev_of(tg.data(), tg.size() * 4);
      DevBuf dl(m.size() * 4), rows(m.size() * 8), sum(8);
      launch_combine_cross_entropy(dm.as<float>(), ds.as<float>(), dt.as<float>(),
                                   dtg.as<std::int32_t>(), dl.as<float>(), rows.as<double>(),
                                   sum.as<double>(), N, nullptr);
      expect_ok(what);
      std::vector<unsigned char> o = dl.raw();
      append(o, sum.raw());
      return o;
    });
    HostArr lr(DT::f32, N);
    std::memcpy(lr.data(), lref.data(), lref.size() * 4);
    expect_bits(what + " lse", arr_from(out, 0, DT::f32, N), lr);
    double got = 0;
    std::memcpy(&got, out.data() + 4 * static_cast<std::size_t>(N), sizeof(got));
    checked();
    if (!(std::abs(got - ref) <= 1e-12 * std::max(1.0, scale)))  // NaN fails too
      fail("%s: total %.17g, the CPU's %.17g", what.c_str(), got, ref);
  }
  launch_combine_cross_entropy(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0,
                               nullptr);
  expect_ok("combine_cross_entropy N=0");
}

}  // namespace
}  // namespace cuda_emu_test
