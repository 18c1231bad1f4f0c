// layernorm.cu against the CPU's f32 LayerNorm (backend/cpu) on the widened operands, as the CPU
// table runs it (cpu_table.cpp: In32 / Out32 / Acc32): y and dx rounded once to their dtype, dw
// and db accumulated (16-bit: round(old + f32 total)). The sums run in another order than the
// CPU's, so values agree to a tolerance scaled by the magnitudes summed.
#include <algorithm>
#include <cmath>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cuda/ops/layernorm.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

struct Shape {
  std::int64_t N;
  int C;
};
// Rows fewer than a block's 8, one warp's 32 columns and not, several blocks, several strips of
// the dw/db reduction (at least 32 rows each), and 249 strips of 33 rows (N > 8192). C a multiple
// of 8 takes the vectorized form where the operands allow (layernorm_vectorized): 32 and 64 (a
// lane with one chunk or none), 768 (GPT-2 small: 3 chunks a lane), 1040 (more than 4 chunks a
// lane: the 8-chunk kernels, some lanes with one chunk fewer), 2048 (the widest), and 2056 (too
// wide: the scalar form).
constexpr Shape kShapes[] = {{1, 1},    {3, 5},    {8, 32},  {9, 33},   {17, 100},  {40, 257},
                             {300, 64}, {1000, 3}, {8200, 3}, {20, 768}, {37, 1040}, {3, 2048},
                             {2, 2056}};

struct FwdMix {
  DT x, w, b, y;
  bool has_w, has_b;
};
constexpr FwdMix kFwdMixes[] = {
    {DT::f32, DT::f32, DT::f32, DT::f32, true, true},
    {DT::bf16, DT::f16, DT::f32, DT::bf16, true, true},
    {DT::f16, DT::bf16, DT::bf16, DT::f32, true, true},
    {DT::f32, DT::f32, DT::bf16, DT::f16, true, true},
    {DT::f32, DT::f32, DT::f32, DT::f32, false, true},
    {DT::bf16, DT::f32, DT::f32, DT::bf16, true, false},
    {DT::f16, DT::f32, DT::f32, DT::f16, false, false},
    {DT::bf16, DT::bf16, DT::bf16, DT::bf16, true, true},  // a bf16 GPT's
};

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

EMU_TEST("layernorm", forward) {
  std::mt19937 g(21);
  const float eps = 1e-5f;
  for (const Shape& s : kShapes)
    for (const FwdMix& mx : kFwdMixes) {
      const std::int64_t N = s.N, NC = N * s.C;
      const int C = s.C;
      // The two largest shapes (many warps: slow to emulate) take fewer mixes.
      const std::size_t k = static_cast<std::size_t>(&mx - kFwdMixes);
      if (N >= 1000 && k != (N > 1000 ? 1u : k % 3 == 0 ? k : 99u)) continue;
      HostArr x = random_arr(mx.x, NC, g, 2.0f);
      for (std::int64_t i = 0; i < NC; ++i) x.set(i, x.get(i) + 0.5f);  // a nonzero mean
      const HostArr w = random_arr(mx.w, C, g), b = random_arr(mx.b, C, g);
      // The CPU on the widened operands, y rounded once.
      std::vector<float> x32 = x.f32(), w32 = w.f32(), b32 = b.f32(), y32(static_cast<std::size_t>(NC));
      std::vector<float> rmean(static_cast<std::size_t>(N)), rrstd(static_cast<std::size_t>(N));
      strata::cpu::layernorm_forward(x32.data(), mx.has_w ? w32.data() : nullptr,
                                     mx.has_b ? b32.data() : nullptr, y32.data(), rmean.data(),
                                     rrstd.data(), static_cast<int>(N), C, eps);
      std::vector<double> yref(y32.begin(), y32.end());
      std::vector<double> mref(rmean.begin(), rmean.end()), rref(rrstd.begin(), rrstd.end());
      const std::string what =
          fmt("layernorm_forward N=%lld C=%d x %s w %s b %s y %s", static_cast<long long>(N), C,
              mx.has_w ? name(mx.w) : "-", mx.has_b ? name(mx.b) : "-", name(mx.x), name(mx.y));
      const auto out = run_orders(
          what,
          [&] {
            DevBuf dx(x), dw(w), db(b), dy(static_cast<std::size_t>(NC) * size_of(mx.y));
            DevBuf dm(static_cast<std::size_t>(N) * 4), dr(static_cast<std::size_t>(N) * 4);
            launch_layernorm_forward(dx.get(), mx.x, mx.has_w ? dw.get() : nullptr, mx.w,
                                     mx.has_b ? db.get() : nullptr, mx.b, dy.get(), mx.y,
                                     dm.as<float>(), dr.as<float>(), N, C, eps, nullptr);
            expect_ok(what);
            std::vector<unsigned char> o = dy.raw();
            append(o, dm.raw());
            append(o, dr.raw());
            return o;
          },
          N > 1000 ? 2 : 3);
      const std::size_t yb = static_cast<std::size_t>(NC) * size_of(mx.y);
      // mean: the f32 sums of C values of magnitude ~2.5 in two orders.
      expect_close(what + " mean", arr_from(out, yb, DT::f32, N), mref, 1e-5, 2e-6 * std::sqrt(C));
      expect_close(what + " rstd", arr_from(out, yb + 4 * N, DT::f32, N), rref, 2e-5);
      expect_close(what + " y", arr_from(out, 0, mx.y, NC), yref, 2e-5, 1e-5 * max_abs(yref));
    }
  launch_layernorm_forward(nullptr, DT::f32, nullptr, DT::f32, nullptr, DT::f32, nullptr, DT::f32,
                           nullptr, nullptr, 0, 5, 1e-5f, nullptr);
  expect_ok("layernorm_forward N=0");
}

struct BwdMix {
  DT dy, x, w, dx, dw, db;
  bool has_w, has_dw, has_db;
  int alias;  // 0: dx separate; 1: dx == dy; 2: dx == x
};
constexpr BwdMix kBwdMixes[] = {
    {DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, true, true, true, 0},
    {DT::bf16, DT::f16, DT::bf16, DT::f32, DT::bf16, DT::f16, true, true, true, 0},
    {DT::f16, DT::bf16, DT::f32, DT::bf16, DT::f32, DT::bf16, true, true, true, 0},
    {DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, true, true, true, 1},
    {DT::bf16, DT::bf16, DT::bf16, DT::bf16, DT::bf16, DT::bf16, true, true, true, 2},
    {DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, false, true, true, 0},
    {DT::f32, DT::bf16, DT::f32, DT::f16, DT::f32, DT::f32, true, true, false, 0},
    {DT::f16, DT::f32, DT::f16, DT::f16, DT::f16, DT::f16, true, false, true, 1},
    {DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, DT::f32, true, false, false, 0},
};

EMU_TEST("layernorm", backward) {
  std::mt19937 g(22);
  for (const Shape& s : kShapes)
    for (const BwdMix& mx : kBwdMixes) {
      const std::int64_t N = s.N, NC = N * s.C;
      const int C = s.C;
      const std::size_t k = static_cast<std::size_t>(&mx - kBwdMixes);
      if (N >= 1000 && k != (N > 1000 ? 1u : k % 3 == 0 ? k : 99u)) continue;
      if (mx.alias == 1 && mx.dx != mx.dy) continue;
      if (mx.alias == 2 && mx.dx != mx.x) continue;
      const HostArr dy = random_arr(mx.dy, NC, g), x = random_arr(mx.x, NC, g, 2.0f);
      const HostArr w = random_arr(mx.w, C, g);
      const HostArr dw0 = random_arr(mx.dw, C, g), db0 = random_arr(mx.db, C, g);  // += into these
      // mean and rstd of x (the CPU forward's), inputs of both.
      std::vector<float> x32 = x.f32(), dy32 = dy.f32(), w32 = w.f32();
      std::vector<float> y32(static_cast<std::size_t>(NC)), mean(static_cast<std::size_t>(N)),
          rstd(static_cast<std::size_t>(N));
      strata::cpu::layernorm_forward(x32.data(), nullptr, nullptr, y32.data(), mean.data(),
                                     rstd.data(), static_cast<int>(N), C, 1e-5f);
      // The CPU: dx overwritten; dw/db accumulated in f32 (into the old values when f32, into
      // zeroed accumulators added once when 16-bit).
      std::vector<float> dx32(static_cast<std::size_t>(NC));
      std::vector<float> dwa(static_cast<std::size_t>(C), 0.0f), dba(static_cast<std::size_t>(C), 0.0f);
      if (mx.dw == DT::f32) dwa = dw0.f32();
      if (mx.db == DT::f32) dba = db0.f32();
      strata::cpu::layernorm_backward(dy32.data(), x32.data(), mx.has_w ? w32.data() : nullptr,
                                      mean.data(), rstd.data(), dx32.data(),
                                      mx.has_dw ? dwa.data() : nullptr,
                                      mx.has_db ? dba.data() : nullptr, static_cast<int>(N), C);
      std::vector<double> dxref(dx32.begin(), dx32.end());
      std::vector<double> dwref(static_cast<std::size_t>(C)), dbref(static_cast<std::size_t>(C));
      std::vector<double> dwtol(static_cast<std::size_t>(C)), dbtol(static_cast<std::size_t>(C));
      for (int c = 0; c < C; ++c) {
        const double ow = dw0.get(c), ob = db0.get(c);
        dwref[static_cast<std::size_t>(c)] = mx.dw == DT::f32 ? dwa[static_cast<std::size_t>(c)] : ow + dwa[static_cast<std::size_t>(c)];
        dbref[static_cast<std::size_t>(c)] = mx.db == DT::f32 ? dba[static_cast<std::size_t>(c)] : ob + dba[static_cast<std::size_t>(c)];
        double sw = std::fabs(ow), sb = std::fabs(ob);
        for (std::int64_t r = 0; r < N; ++r) {
          const double gv = dy32[static_cast<std::size_t>(r * C + c)];
          const double xh = (x32[static_cast<std::size_t>(r * C + c)] - mean[static_cast<std::size_t>(r)]) * rstd[static_cast<std::size_t>(r)];
          sw += std::fabs(gv * xh);
          sb += std::fabs(gv);
        }
        dwtol[static_cast<std::size_t>(c)] = 2e-6 * sw;
        dbtol[static_cast<std::size_t>(c)] = 2e-6 * sb;
      }
      const std::string what = fmt(
          "layernorm_backward N=%lld C=%d dy %s x %s w %s dx %s dw %s db %s%s",
          static_cast<long long>(N), C, name(mx.dy), name(mx.x), mx.has_w ? name(mx.w) : "-",
          name(mx.dx), mx.has_dw ? name(mx.dw) : "-", mx.has_db ? name(mx.db) : "-",
          mx.alias == 1 ? " (dx == dy)" : mx.alias == 2 ? " (dx == x)" : "");
      const bool grads = mx.has_dw || mx.has_db;
      const std::int64_t pf = layernorm_backward_partial_floats(N, C);
      const auto out = run_orders(
          what,
          [&] {
            DevBuf bdy(dy), bx(x), bw(w), bdw(dw0), bdb(db0);
            DevBuf bm(static_cast<std::size_t>(N) * 4), br(static_cast<std::size_t>(N) * 4);
            bm.upload(mean.data(), mean.size() * 4);
            br.upload(rstd.data(), rstd.size() * 4);
            DevBuf bdx(mx.alias ? 0 : static_cast<std::size_t>(NC) * size_of(mx.dx));
            DevBuf part(grads ? static_cast<std::size_t>(pf) * 4 : 0);  // exactly what it asks
            void* dx = mx.alias == 1 ? bdy.get() : mx.alias == 2 ? bx.get() : bdx.get();
            launch_layernorm_backward(bdy.get(), mx.dy, bx.get(), mx.x,
                                      mx.has_w ? bw.get() : nullptr, mx.w, bm.as<float>(),
                                      br.as<float>(), dx, mx.dx, mx.has_dw ? bdw.get() : nullptr,
                                      mx.dw, mx.has_db ? bdb.get() : nullptr, mx.db, N, C,
                                      grads ? part.as<float>() : nullptr, nullptr);
            expect_ok(what);
            std::vector<unsigned char> o = mx.alias == 1 ? bdy.raw() : mx.alias == 2 ? bx.raw() : bdx.raw();
            append(o, bdw.raw());
            append(o, bdb.raw());
            return o;
          },
          N > 1000 ? 2 : 3);
      const std::size_t xb = static_cast<std::size_t>(NC) * size_of(mx.dx);
      // dx: rstd * (dxh - mean(dxh) - xh mean(dxh xh)): the means are f32 sums in two orders.
      expect_close(what + " dx", arr_from(out, 0, mx.dx, NC), dxref, 2e-5, 2e-5 * max_abs(dxref));
      const HostArr gdw = arr_from(out, xb, mx.dw, C), gdb = arr_from(out, xb + C * size_of(mx.dw), mx.db, C);
      if (mx.has_dw) expect_within(what + " dw", gdw, dwref, dwtol);
      else expect_bits(what + " dw untouched", gdw, dw0);
      if (mx.has_db) expect_within(what + " db", gdb, dbref, dbtol);
      else expect_bits(what + " db untouched", gdb, db0);
    }
  launch_layernorm_backward(nullptr, DT::f32, nullptr, DT::f32, nullptr, DT::f32, nullptr, nullptr,
                            nullptr, DT::f32, nullptr, DT::f32, nullptr, DT::f32, 0, 7, nullptr,
                            nullptr);
  expect_ok("layernorm_backward N=0");
  checked();
  if (layernorm_backward_partial_floats(0, 7) != 0) fail("partial floats for N=0 not 0");
}

// Which operands take the vectorized form; and that form's dw/db are the same bits as the scalar
// form's (the same sums in the same order), its dx the same values to rounding: the same backward
// run with 16-byte aligned operands and with every row tensor 2 bytes off alignment.
EMU_TEST("layernorm", vectorized_form) {
  DevBuf buf(4096);
  char* a = buf.as<char>();
  const auto vec = [&](const void* w, DT wdt, const void* b, DT bdt, int C,
                       std::initializer_list<const void*> rows) {
    return layernorm_vectorized(w, wdt, b, bdt, C, rows);
  };
  const struct {
    bool got, want;
    const char* what;
  } cases[] = {
      {vec(a, DT::bf16, a + 1024, DT::bf16, 768, {a + 2048, a + 3072}), true, "bf16, C 768"},
      {vec(nullptr, DT::f32, nullptr, DT::f32, 8, {a}), true, "no w or b, C 8"},
      {vec(a, DT::f32, nullptr, DT::bf16, 2048, {a, a}), true, "w alone, C 2048"},
      {vec(a, DT::f32, a, DT::bf16, 768, {a, a}), false, "w and b of two dtypes"},
      {vec(a, DT::f32, a, DT::f32, 772, {a, a}), false, "C not a multiple of 8"},
      {vec(a, DT::f32, a, DT::f32, 2056, {a, a}), false, "C above 2048"},
      {vec(a, DT::f32, a, DT::f32, 0, {a, a}), false, "C 0"},
      {vec(a + 8, DT::f32, a, DT::f32, 768, {a, a}), false, "w off alignment"},
      {vec(a, DT::f32, a, DT::f32, 768, {a, a + 2}), false, "a row tensor off alignment"},
  };
  for (const auto& c : cases)
    if (c.got != c.want) fail("layernorm_vectorized: %s: %d, not %d", c.what, c.got, c.want);
  checked(static_cast<long long>(sizeof(cases) / sizeof(cases[0])));

  std::mt19937 g(23);
  const std::int64_t N = 70;
  const int C = 264;  // 33 chunks: lane 0 takes two
  const std::int64_t NC = N * C;
  const HostArr dy = random_arr(DT::bf16, NC, g), x = random_arr(DT::bf16, NC, g, 2.0f);
  const HostArr w = random_arr(DT::bf16, C, g);
  std::vector<float> x32 = x.f32(), y32(static_cast<std::size_t>(NC)), mean(static_cast<std::size_t>(N)),
      rstd(static_cast<std::size_t>(N));
  strata::cpu::layernorm_forward(x32.data(), nullptr, nullptr, y32.data(), mean.data(), rstd.data(),
                                 static_cast<int>(N), C, 1e-5f);
  std::vector<unsigned char> out[2];
  for (int off = 0; off < 2; ++off) {
    const std::size_t o = off ? 2 : 0;  // bytes: one bf16 element
    DevBuf bdy(dy.bytes.size() + 16), bx(x.bytes.size() + 16), bdx(dy.bytes.size() + 16);
    bdy.upload(dy, o);
    bx.upload(x, o);
    DevBuf bw(w), bm(static_cast<std::size_t>(N) * 4), br(static_cast<std::size_t>(N) * 4);
    bm.upload(mean.data(), mean.size() * 4);
    br.upload(rstd.data(), rstd.size() * 4);
    std::vector<float> zeros(static_cast<std::size_t>(C), 0.0f);
    DevBuf bdw(static_cast<std::size_t>(C) * 4), bdb(static_cast<std::size_t>(C) * 4);
    bdw.upload(zeros.data(), zeros.size() * 4);
    bdb.upload(zeros.data(), zeros.size() * 4);
    DevBuf part(static_cast<std::size_t>(layernorm_backward_partial_floats(N, C)) * 4);
    char *pdy = bdy.as<char>() + o, *px = bx.as<char>() + o, *pdx = bdx.as<char>() + o;
    const bool v = layernorm_vectorized(bw.get(), DT::bf16, nullptr, DT::f32, C, {pdy, px, pdx});
    if (v != (off == 0)) fail("vectorized_form: offset %d took the %s form", off, v ? "vectorized" : "scalar");
    launch_layernorm_backward(pdy, DT::bf16, px, DT::bf16, bw.get(), DT::bf16, bm.as<float>(),
                              br.as<float>(), pdx, DT::bf16, bdw.get(), DT::f32, bdb.get(),
                              DT::f32, N, C, part.as<float>(), nullptr);
    expect_ok(fmt("layernorm_backward, row tensors %d bytes off alignment", off ? 2 : 0));
    std::vector<unsigned char> r(static_cast<std::size_t>(NC) * 2);
    bdx.download(r.data(), r.size(), o);
    append(r, bdw.raw());
    append(r, bdb.raw());
    out[off] = std::move(r);
  }
  const std::size_t xb = static_cast<std::size_t>(NC) * 2;
  expect_bits("vectorized_form dw (vectorized vs scalar)", arr_from(out[0], xb, DT::f32, C),
              arr_from(out[1], xb, DT::f32, C));
  expect_bits("vectorized_form db (vectorized vs scalar)", arr_from(out[0], xb + 4 * C, DT::f32, C),
              arr_from(out[1], xb + 4 * C, DT::f32, C));
  const HostArr dx1 = arr_from(out[1], 0, DT::bf16, NC);
  std::vector<double> dxs(static_cast<std::size_t>(NC));
  for (std::int64_t i = 0; i < NC; ++i) dxs[static_cast<std::size_t>(i)] = dx1.get(i);
  expect_close("vectorized_form dx (vectorized vs scalar)", arr_from(out[0], 0, DT::bf16, NC), dxs,
               2e-5, 2e-5 * max_abs(dxs));
}

}  // namespace
}  // namespace cuda_emu_test
