// optimizer.cu (its device branch: the _rn intrinsics of optimizer.hpp's ieee::) against
// optim::adamw_step_reference / sgd_step_reference, bitwise: master, state and the 16-bit copy,
// over several chained steps, every gradient dtype, both lerp forms, with and without weight
// decay, bias correction, momentum, dampening, Nesterov; past the 2048-block cap.
#include <cstring>

#include "framework/backend/cuda/ops/optimizer.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/sgd.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;
namespace optim = strata::optim;

constexpr std::int64_t kBig = 2048LL * 256 + 300;  // past the grid's 2048 blocks
constexpr std::int64_t kSizes[] = {1, 255, 257, 5000, kBig};

HostArr grads(DT d, std::int64_t n, std::mt19937& g) {
  HostArr a = random_arr(d, n, g, 0.5f);
  const float sp[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 1e-20f, 30.0f, -1e4f};
  for (std::size_t i = 0; i < std::size(sp) && static_cast<std::int64_t>(i) < n; ++i)
    a.set(static_cast<std::int64_t>(i * 13 % static_cast<std::size_t>(n)), sp[i]);
  return a;
}

HostArr round16(const std::vector<float>& p, DT d) {
  HostArr r(d, static_cast<std::int64_t>(p.size()));
  for (std::size_t i = 0; i < p.size(); ++i) r.set(static_cast<std::int64_t>(i), p[i]);
  return r;
}

HostArr as_arr(const std::vector<float>& v) {
  HostArr a(DT::f32, static_cast<std::int64_t>(v.size()));
  std::memcpy(a.data(), v.data(), v.size() * 4);
  return a;
}

EMU_TEST("optimizer", adamw) {
  std::mt19937 g(61);
  struct H {
    optim::AdamWHyper h;
    float grad_scale;
  };
  std::vector<H> hypers;
  hypers.push_back({optim::AdamWHyper{}, 1.0f});
  hypers.push_back({optim::AdamWHyper{3e-4, 0.3, 0.95, 1e-6, 0.0, true}, 0.25f});  // w >= 0.5
  hypers.push_back({optim::AdamWHyper{1e-2, 0.9, 0.999, 1e-8, 0.1, false}, 0.5f});
  for (std::int64_t n : kSizes)
    for (std::size_t hi = 0; hi < hypers.size(); ++hi)
      for (DT gd : kFloatDTs)
        for (int p16 = 0; p16 < 3; ++p16) {  // none, bf16, f16
          if (n == kBig && (gd != DT::bf16 || p16 != 1 || hi != 0)) continue;
          const DT hd = p16 == 2 ? DT::f16 : DT::bf16;
          const H& hy = hypers[hi];
          std::vector<float> p = random_arr(DT::f32, n, g).f32(), m(static_cast<std::size_t>(n), 0.0f),
                             v(static_cast<std::size_t>(n), 0.0f);
          const std::string what = fmt("adamw n=%lld hyper %zu grad %s param16 %s",
                                       static_cast<long long>(n), hi, name(gd),
                                       p16 ? name(hd) : "-");
          for (std::int64_t step = 1; step <= 3; ++step) {
            const HostArr gr = grads(gd, n, g);
            // The reference on the widened gradient (the CPU table's In32).
            std::vector<float> rp = p, rm = m, rv = v, g32 = gr.f32();
            optim::adamw_step_reference(rp.data(), g32.data(), rm.data(), rv.data(),
                                        static_cast<std::size_t>(n), hy.h, step, hy.grad_scale);
            const optim::detail::AdamWConsts c = optim::detail::adamw_consts(hy.h, step, hy.grad_scale);
            const std::string ws = what + fmt(" step %lld", static_cast<long long>(step));
            const auto out = run_orders(ws, [&] {
              DevBuf dp(static_cast<std::size_t>(n) * 4), dm(static_cast<std::size_t>(n) * 4),
                  dv(static_cast<std::size_t>(n) * 4), dg(gr), dh(p16 ? static_cast<std::size_t>(n) * 2 : 0);
              dp.upload(p.data(), p.size() * 4);
              dm.upload(m.data(), m.size() * 4);
              dv.upload(v.data(), v.size() * 4);
              launch_adamw_step(dp.as<float>(), dg.get(), gd, dm.as<float>(), dv.as<float>(), n, c,
                                p16 ? dh.get() : nullptr, hd, nullptr);
              expect_ok(ws);
              std::vector<unsigned char> o = dp.raw();
              append(o, dm.raw());
              append(o, dv.raw());
              if (p16) append(o, dh.raw());
              return o;
            }, n == kBig ? 2 : 3);
            const std::size_t b = static_cast<std::size_t>(n) * 4;
            expect_bits(ws + " master", arr_from(out, 0, DT::f32, n), as_arr(rp));
            expect_bits(ws + " m", arr_from(out, b, DT::f32, n), as_arr(rm));
            expect_bits(ws + " v", arr_from(out, 2 * b, DT::f32, n), as_arr(rv));
            if (p16) expect_bits(ws + " param16", arr_from(out, 3 * b, hd, n), round16(rp, hd));
            p = rp;
            m = rm;
            v = rv;
          }
        }
}

EMU_TEST("optimizer", sgd) {
  std::mt19937 g(62);
  struct H {
    optim::SGDHyper h;
    float grad_scale;
  };
  const H hypers[] = {
      {optim::SGDHyper{1e-2, 0.0, 0.0, 0.0, false}, 1.0f},
      {optim::SGDHyper{1e-2, 0.0, 0.0, 0.01, false}, 0.5f},
      {optim::SGDHyper{3e-3, 0.9, 0.1, 0.01, false}, 1.0f},
      {optim::SGDHyper{3e-3, 0.9, 0.0, 0.0, true}, 0.125f},
  };
  for (std::int64_t n : kSizes)
    for (std::size_t hi = 0; hi < std::size(hypers); ++hi)
      for (DT gd : kFloatDTs)
        for (int p16 = 0; p16 < 3; ++p16) {
          if (n == kBig && (gd != DT::f16 || p16 != 2 || hi != 2)) continue;
          const DT hd = p16 == 2 ? DT::f16 : DT::bf16;
          const H& hy = hypers[hi];
          const bool mom = hy.h.momentum != 0.0;
          std::vector<float> p = random_arr(DT::f32, n, g).f32();
          // The buffer's contents before step 1 are never read: garbage (NaN) proves it.
          std::vector<float> buf(static_cast<std::size_t>(n), std::nanf(""));
          const std::string what = fmt("sgd n=%lld hyper %zu grad %s param16 %s",
                                       static_cast<long long>(n), hi, name(gd), p16 ? name(hd) : "-");
          for (std::int64_t step = 1; step <= 3; ++step) {
            const HostArr gr = grads(gd, n, g);
            std::vector<float> rp = p, rb = buf, g32 = gr.f32();
            optim::sgd_step_reference(rp.data(), g32.data(), mom ? rb.data() : nullptr,
                                      static_cast<std::size_t>(n), hy.h, step, hy.grad_scale);
            const optim::detail::SgdConsts c = optim::detail::sgd_consts(hy.h, step, hy.grad_scale);
            const std::string ws = what + fmt(" step %lld", static_cast<long long>(step));
            const auto out = run_orders(ws, [&] {
              DevBuf dp(static_cast<std::size_t>(n) * 4), db(mom ? static_cast<std::size_t>(n) * 4 : 0),
                  dg(gr), dh(p16 ? static_cast<std::size_t>(n) * 2 : 0);
              dp.upload(p.data(), p.size() * 4);
              if (mom) db.upload(buf.data(), buf.size() * 4);
              launch_sgd_step(dp.as<float>(), dg.get(), gd, mom ? db.as<float>() : nullptr, n, c,
                              p16 ? dh.get() : nullptr, hd, nullptr);
              expect_ok(ws);
              std::vector<unsigned char> o = dp.raw();
              if (mom) append(o, db.raw());
              if (p16) append(o, dh.raw());
              return o;
            }, n == kBig ? 2 : 3);
            const std::size_t b = static_cast<std::size_t>(n) * 4;
            expect_bits(ws + " master", arr_from(out, 0, DT::f32, n), as_arr(rp));
            if (mom) expect_bits(ws + " momentum", arr_from(out, b, DT::f32, n), as_arr(rb));
            if (p16)
              expect_bits(ws + " param16", arr_from(out, mom ? 2 * b : b, hd, n), round16(rp, hd));
            p = rp;
            buf = rb;
          }
        }
}

}  // namespace
}  // namespace cuda_emu_test
