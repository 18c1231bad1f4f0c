// Adafactor's and LAMB's kernels (adafactor.cu, lamb.cu) against the CPU's (framework/optim
// adafactor.cpp, lamb.cpp, cpu::sum_squares), bitwise: the sums in the CPU's order (row
// segments, 8 accumulators, 16384/32768-element chunks), the updates operation for operation.
// Matrices are cut by ranges that start and end inside rows (a ZeRO slice boundary), span
// several chunks, and have rows longer than a chunk; vectors have tails; every case runs in
// several scheduling orders.
#include <cstring>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cuda/ops/shard_sum_updates.hpp"
#include "framework/optim/adafactor.hpp"
#include "framework/optim/lamb.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;
namespace optim = strata::optim;

std::vector<float> rnd(std::int64_t n, std::mt19937& g, float scale, bool positive = false) {
  std::vector<float> v = random_arr(DT::f32, n, g, scale).f32();
  if (positive)
    for (float& x : v) x = std::fabs(x) + 1e-3f * scale;
  return v;
}

HostArr f32_arr(const std::vector<float>& v) {
  HostArr a(DT::f32, static_cast<std::int64_t>(v.size()));
  std::memcpy(a.data(), v.data(), v.size() * 4);
  return a;
}

// Doubles compared as their bits (two f32 words each).
HostArr f64_arr(const std::vector<double>& v) {
  HostArr a(DT::f32, static_cast<std::int64_t>(v.size() * 2));
  std::memcpy(a.data(), v.data(), v.size() * 8);
  return a;
}

std::vector<double> f64_of(const std::vector<unsigned char>& bytes, std::size_t at, std::size_t n) {
  std::vector<double> v(n);
  std::memcpy(v.data(), bytes.data() + at, n * 8);
  return v;
}

HostArr round16(const std::vector<float>& p, DT d) {
  HostArr r(d, static_cast<std::int64_t>(p.size()));
  for (std::size_t i = 0; i < p.size(); ++i) r.set(static_cast<std::int64_t>(i), p[i]);
  return r;
}

DevBuf dev(const void* p, std::size_t bytes) {
  DevBuf b(bytes);
  if (bytes) b.upload(p, bytes);
  return b;
}
template <typename T>
DevBuf dev(const std::vector<T>& v) {
  return dev(v.data(), v.size() * sizeof(T));
}

struct Shape2 {
  std::int64_t rows, cols;
};
// Small; several chunks with short rows; rows longer than a chunk (a chunk inside one row).
constexpr Shape2 kMatrices[] = {{5, 7}, {300, 131}, {3, 17000}};

// The ranges [first, first + n) of a rows x cols matrix a shard may own: all of it; from the
// middle of row 1 to a few elements before the end (two slice boundaries inside rows); inside
// one row.
std::vector<std::pair<std::int64_t, std::int64_t>> ranges(const Shape2& s) {
  const std::int64_t N = s.rows * s.cols;
  std::vector<std::pair<std::int64_t, std::int64_t>> out = {{0, N}};
  const std::int64_t first = s.cols + s.cols / 2;
  if (first + 4 < N) out.push_back({first, N - first - 3});
  if (s.cols > 3) out.push_back({1, s.cols - 2});
  return out;
}

EMU_TEST("shard_sums", sum_squares_add) {
  std::mt19937 g(5);
  for (std::int64_t n : {1, 9, 4096 + 5, 32768, 32768 + 3, 70001})
    for (DT d : kFloatDTs) {
      const HostArr x = random_arr(d, n, g, 2.0f);
      double ref = 0.25;  // accumulated into
      const std::vector<float> x32 = x.f32();
      ref += d == DT::f32 ? strata::cpu::sum_squares(x32.data(), static_cast<std::size_t>(n))
                          : strata::cpu::sum_squares(static_cast<const std::uint16_t*>(x.data()),
                                                     dtype(d), static_cast<std::size_t>(n));
      const std::string what = fmt("sum_squares_add n=%lld %s", static_cast<long long>(n), name(d));
      const auto out = run_orders(what, [&] {
        DevBuf dx(x), dout = dev(std::vector<double>{0.25}),
                      dpart(static_cast<std::size_t>(sum_squares_add_partials(n)) * 8);
        launch_sum_squares_add(dx.get(), d, n, dpart.as<double>(), dout.as<double>(), nullptr);
        expect_ok(what);
        return dout.raw();
      });
      expect_bits(what, f64_arr(f64_of(out, 0, 1)), f64_arr({ref}));
    }
}

EMU_TEST("shard_sums", adafactor_matrix) {
  std::mt19937 g(11);
  const float gs = 0.5f, eps1 = 1e-30f;
  const double beta2 = 0.75;
  for (const Shape2& s : kMatrices)
    for (const auto& [first, n] : ranges(s)) {
      const std::string what = fmt("adafactor %lldx%lld [%lld, +%lld)", static_cast<long long>(s.rows),
                                   static_cast<long long>(s.cols), static_cast<long long>(first),
                                   static_cast<long long>(n));
      const auto un = static_cast<std::size_t>(n);
      // Magnitudes over many binades: the sums are inexact, so their order shows in the last bits.
      std::vector<float> grad = rnd(n, g, 0.3f);
      for (std::size_t i = 0; i < grad.size(); ++i)
        grad[i] = std::ldexp(grad[i], static_cast<int>(i % 29) - 14);
      // sq_sums, into sums that already hold something (another parameter's part: accumulated).
      std::vector<double> rs(static_cast<std::size_t>(s.rows)), cs(static_cast<std::size_t>(s.cols));
      for (double& v : rs) v = std::fabs(std::normal_distribution<double>()(g));
      for (double& v : cs) v = std::fabs(std::normal_distribution<double>()(g));
      std::vector<double> rr = rs, rc = cs;
      optim::adafactor_sq_sums(grad.data(), first, un, s.cols, gs, eps1, rr.data(), rc.data());
      auto out = run_orders(what + " sq_sums", [&] {
        DevBuf dg = dev(grad), dr = dev(rs), dc = dev(cs);
        launch_adafactor_sq_sums(dg.as<float>(), first, n, s.cols, gs, eps1, dr.as<double>(),
                                 dc.as<double>(), nullptr);
        expect_ok(what);
        std::vector<unsigned char> o = dr.raw();
        append(o, dc.raw());
        return o;
      });
      expect_bits(what + " row sums", f64_arr(f64_of(out, 0, rs.size())), f64_arr(rr));
      expect_bits(what + " col sums", f64_arr(f64_of(out, rs.size() * 8, cs.size())), f64_arr(rc));

      // ema and factors of the statistics.
      std::vector<float> row = rnd(s.rows, g, 1.0f, true), col = rnd(s.cols, g, 1.0f, true);
      std::vector<float> er = row, ec = col, rf(row.size()), cf(col.size());
      optim::adafactor_ema(er.data(), rr.data(), er.size(), static_cast<double>(s.cols), beta2);
      optim::adafactor_ema(ec.data(), rc.data(), ec.size(), static_cast<double>(s.rows), beta2);
      optim::adafactor_factors(er.data(), s.rows, ec.data(), s.cols, rf.data(), cf.data());
      out = run_orders(what + " ema+factors", [&] {
        DevBuf dr = dev(row), dc = dev(col), dsr = dev(rr), dsc = dev(rc),
               drf(row.size() * 4), dcf(col.size() * 4);
        launch_adafactor_ema(dr.as<float>(), dsr.as<double>(), s.rows, static_cast<double>(s.cols),
                             beta2, nullptr);
        launch_adafactor_ema(dc.as<float>(), dsc.as<double>(), s.cols, static_cast<double>(s.rows),
                             beta2, nullptr);
        launch_adafactor_factors(dr.as<float>(), s.rows, dc.as<float>(), s.cols, drf.as<float>(),
                                 dcf.as<float>(), nullptr);
        expect_ok(what);
        std::vector<unsigned char> o = dr.raw();
        append(o, dc.raw());
        append(o, drf.raw());
        append(o, dcf.raw());
        return o;
      });
      std::size_t at = 0;
      for (const auto* ref : {&er, &ec, &rf, &cf}) {
        expect_bits(what + " stats/factors", arr_from(out, at, DT::f32, static_cast<std::int64_t>(ref->size())),
                    f32_arr(*ref));
        at += ref->size() * 4;
      }

      // factored_sumsq, accumulated into 0.5.
      const double rsum = 0.5 + optim::adafactor_factored_sumsq(grad.data(), first, un, s.cols, gs,
                                                                rf.data(), cf.data());
      out = run_orders(what + " factored_sumsq", [&] {
        DevBuf dg = dev(grad), drf = dev(rf), dcf = dev(cf), dout = dev(std::vector<double>{0.5}),
               dpart(static_cast<std::size_t>(adafactor_partials(n)) * 8);
        launch_adafactor_factored_sumsq(dg.as<float>(), first, n, s.cols, gs, drf.as<float>(),
                                        dcf.as<float>(), dpart.as<double>(), dout.as<double>(),
                                        nullptr);
        expect_ok(what);
        return dout.raw();
      });
      expect_bits(what + " factored_sumsq", f64_arr(f64_of(out, 0, 1)), f64_arr({rsum}));

      // The update: without / with beta1 and weight decay, with a bf16 / f16 copy.
      for (int variant = 0; variant < 3; ++variant) {
        optim::AdafactorHyper h;
        if (variant >= 1) h.beta1 = 0.9;
        if (variant == 2) h.weight_decay = 0.01;
        optim::AdafactorScalars sc{gs, beta2, 1.7, 3e-3};
        const DT hd = variant == 2 ? DT::f16 : DT::bf16;
        const std::vector<float> p0 = rnd(n, g, 1.0f), m0 = rnd(n, g, 0.01f);
        std::vector<float> rp = p0, rm = m0;
        std::vector<std::uint16_t> rq(un);
        optim::adafactor_apply_factored(rp.data(), grad.data(), h.has_beta1() ? rm.data() : nullptr,
                                        first, un, s.cols, rf.data(), cf.data(), h, sc,
                                        variant ? rq.data() : nullptr, dtype(hd));
        const auto c = optim::detail::adafactor_apply_consts(h, sc);
        const std::string wv = what + fmt(" apply variant %d", variant);
        out = run_orders(wv, [&] {
          DevBuf dp = dev(p0), dg = dev(grad), dm = dev(m0), drf = dev(rf), dcf = dev(cf),
                 dq(variant ? un * 2 : 0);
          launch_adafactor_apply_factored(dp.as<float>(), dg.as<float>(),
                                          h.has_beta1() ? dm.as<float>() : nullptr, first, n, s.cols,
                                          drf.as<float>(), dcf.as<float>(), c,
                                          variant ? dq.get() : nullptr, hd, nullptr);
          expect_ok(wv);
          std::vector<unsigned char> o = dp.raw();
          append(o, dm.raw());
          if (variant) append(o, dq.raw());
          return o;
        });
        expect_bits(wv + " param", arr_from(out, 0, DT::f32, n), f32_arr(rp));
        expect_bits(wv + " m", arr_from(out, un * 4, DT::f32, n), f32_arr(rm));
        if (variant) expect_bits(wv + " param16", arr_from(out, un * 8, hd, n), round16(rp, hd));
      }
    }
}

EMU_TEST("shard_sums", adafactor_vector) {
  std::mt19937 g(17);
  const float gs = 2.0f, eps1 = 1e-30f;
  const double beta2 = 0.999;  // u² = g²/v' then spans the gradients' binades
  for (std::int64_t n : {1, 7, 16384 + 9, 40000}) {
    const auto un = static_cast<std::size_t>(n);
    // Magnitudes over many binades: the sums' order shows in their last bits.
    std::vector<float> grad = rnd(n, g, 0.2f);
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = std::ldexp(grad[i], static_cast<int>(i % 23) - 11);
    const std::vector<float> v0 = rnd(n, g, 0.01f, true);
    const std::string what = fmt("adafactor vector n=%lld", static_cast<long long>(n));
    const double rsum = 0.125 + optim::adafactor_vector_sumsq(grad.data(), v0.data(), un, gs, eps1, beta2);
    auto out = run_orders(what + " sumsq", [&] {
      DevBuf dg = dev(grad), dv = dev(v0), dout = dev(std::vector<double>{0.125}),
             dpart(static_cast<std::size_t>(adafactor_partials(n)) * 8);
      launch_adafactor_vector_sumsq(dg.as<float>(), dv.as<float>(), n, gs, eps1, beta2,
                                    dpart.as<double>(), dout.as<double>(), nullptr);
      expect_ok(what);
      return dout.raw();
    });
    expect_bits(what + " sumsq", f64_arr(f64_of(out, 0, 1)), f64_arr({rsum}));
    for (int variant = 0; variant < 2; ++variant) {
      optim::AdafactorHyper h;
      if (variant) {
        h.beta1 = 0.5;
        h.weight_decay = 0.1;
      }
      const optim::AdafactorScalars sc{gs, beta2, 1.0, 1e-2};
      const std::vector<float> p0 = rnd(n, g, 1.0f), m0 = rnd(n, g, 0.01f);
      std::vector<float> rp = p0, rv = v0, rm = m0;
      std::vector<std::uint16_t> rq(un);
      optim::adafactor_apply_vector(rp.data(), grad.data(), rv.data(), variant ? rm.data() : nullptr,
                                    un, h, sc, rq.data(), strata::DType::bf16);
      const auto c = optim::detail::adafactor_apply_consts(h, sc);
      const std::string wv = what + fmt(" apply variant %d", variant);
      out = run_orders(wv, [&] {
        DevBuf dp = dev(p0), dg = dev(grad), dv = dev(v0), dm = dev(m0), dq(un * 2);
        launch_adafactor_apply_vector(dp.as<float>(), dg.as<float>(), dv.as<float>(),
                                      variant ? dm.as<float>() : nullptr, n, eps1,
                                      static_cast<float>(beta2), static_cast<float>(1.0 - beta2), c,
                                      dq.get(), DT::bf16, nullptr);
        expect_ok(wv);
        std::vector<unsigned char> o = dp.raw();
        append(o, dv.raw());
        append(o, dm.raw());
        append(o, dq.raw());
        return o;
      });
      expect_bits(wv + " param", arr_from(out, 0, DT::f32, n), f32_arr(rp));
      expect_bits(wv + " v", arr_from(out, un * 4, DT::f32, n), f32_arr(rv));
      expect_bits(wv + " m", arr_from(out, un * 8, DT::f32, n), f32_arr(rm));
      expect_bits(wv + " param16", arr_from(out, un * 12, DT::bf16, n), round16(rp, DT::bf16));
    }
  }
}

EMU_TEST("shard_sums", lamb) {
  std::mt19937 g(23);
  for (std::int64_t n : {1, 1003, 2 * 16384 + 77})
    for (int variant = 0; variant < 2; ++variant) {
      const auto un = static_cast<std::size_t>(n);
      optim::LambHyper h;
      h.weight_decay = variant ? 0.01 : 0.0;
      h.eps_inside_sqrt = variant == 1;
      const float gs = 0.75f;
      const std::vector<float> p0 = rnd(n, g, 1.0f), grad = rnd(n, g, 0.1f),
                               m0 = rnd(n, g, 0.01f), v0 = rnd(n, g, 1e-4f, true);
      const std::string what = fmt("lamb n=%lld variant %d", static_cast<long long>(n), variant);
      const optim::LambSums ls = optim::lamb_sums(p0.data(), grad.data(), m0.data(), v0.data(), un, h, gs);
      const std::vector<double> rsum = {1.0 + ls.param_sq, 2.0 + ls.update_sq};
      const auto k = optim::detail::lamb_consts(h, gs);
      auto out = run_orders(what + " sums", [&] {
        DevBuf dp = dev(p0), dg = dev(grad), dm = dev(m0), dv = dev(v0),
               dout = dev(std::vector<double>{1.0, 2.0}),
               dpart(static_cast<std::size_t>(lamb_partials(n)) * 8);
        launch_lamb_sums(dp.as<float>(), dg.as<float>(), dm.as<float>(), dv.as<float>(), n, k,
                         dpart.as<double>(), dout.as<double>(), nullptr);
        expect_ok(what);
        return dout.raw();
      });
      expect_bits(what + " sums", f64_arr(f64_of(out, 0, 2)), f64_arr(rsum));
      const double step_size = 1e-3, ratio = 0.37;
      const DT hd = variant ? DT::f16 : DT::bf16;
      std::vector<float> rp = p0, rm = m0, rv = v0;
      std::vector<std::uint16_t> rq(un);
      optim::lamb_apply(rp.data(), grad.data(), rm.data(), rv.data(), un, h, gs, step_size, ratio,
                        rq.data(), dtype(hd));
      out = run_orders(what + " apply", [&] {
        DevBuf dp = dev(p0), dg = dev(grad), dm = dev(m0), dv = dev(v0), dq(un * 2);
        launch_lamb_apply(dp.as<float>(), dg.as<float>(), dm.as<float>(), dv.as<float>(), n, k,
                          static_cast<float>(step_size * ratio), dq.get(), hd, nullptr);
        expect_ok(what);
        std::vector<unsigned char> o = dp.raw();
        append(o, dm.raw());
        append(o, dv.raw());
        append(o, dq.raw());
        return o;
      });
      expect_bits(what + " param", arr_from(out, 0, DT::f32, n), f32_arr(rp));
      expect_bits(what + " m", arr_from(out, un * 4, DT::f32, n), f32_arr(rm));
      expect_bits(what + " v", arr_from(out, un * 8, DT::f32, n), f32_arr(rv));
      expect_bits(what + " param16", arr_from(out, un * 12, hd, n), round16(rp, hd));
    }
}

}  // namespace
}  // namespace cuda_emu_test
