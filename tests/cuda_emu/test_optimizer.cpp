// optimizer.cu (its device branch: the _rn intrinsics of optimizer.hpp's ieee::) against
// optim::adamw_step_reference / sgd_step_reference, bitwise: master, state and the 16-bit copy,
// over several chained steps, every gradient dtype, both lerp forms, with and without weight
// decay, bias correction, momentum, dampening, Nesterov; past the 2048-block cap. Lion against
// optim::lion_step, and the 8-bit kernels (AdamW8bit, Lion8bit) against optim::adamw8bit_step /
// lion8bit_step: master, codes, absmax and the 16-bit copy bitwise, from a quantized random state,
// over chained steps, sizes within one quantization block, at its edge and past it with a tail,
// decay runs that start and end inside blocks, weight decay on and off.
#include <cstring>

#include "framework/backend/cuda/ops/optimizer.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/adamw8bit.hpp"
#include "framework/optim/lion.hpp"
#include "framework/optim/quantize.hpp"
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

EMU_TEST("optimizer", lion) {
  std::mt19937 g(63);
  const optim::LionHyper hypers[] = {{1e-3, 0.9, 0.99, 0.0}, {3e-4, 0.95, 0.98, 0.1}};
  const float scales[] = {1.0f, 0.25f};
  for (std::int64_t n : kSizes)
    for (std::size_t hi = 0; hi < std::size(hypers); ++hi)
      for (DT gd : kFloatDTs)
        for (int p16 = 0; p16 < 3; ++p16) {
          if (n == kBig && (gd != DT::bf16 || p16 != 1 || hi != 1)) continue;
          const DT hd = p16 == 2 ? DT::f16 : DT::bf16;
          std::vector<float> p = random_arr(DT::f32, n, g).f32(), m(static_cast<std::size_t>(n), 0.0f);
          const std::string what = fmt("lion n=%lld hyper %zu grad %s param16 %s",
                                       static_cast<long long>(n), hi, name(gd), p16 ? name(hd) : "-");
          for (std::int64_t step = 1; step <= 3; ++step) {
            const HostArr gr = grads(gd, n, g);
            std::vector<float> rp = p, rm = m, g32 = gr.f32();
            optim::lion_step(rp.data(), g32.data(), rm.data(), static_cast<std::size_t>(n),
                             hypers[hi], step, scales[hi]);
            const optim::detail::LionConsts c = optim::detail::lion_consts(hypers[hi], step, scales[hi]);
            const std::string ws = what + fmt(" step %lld", static_cast<long long>(step));
            const auto out = run_orders(ws, [&] {
              DevBuf dp(static_cast<std::size_t>(n) * 4), dm(static_cast<std::size_t>(n) * 4), dg(gr),
                  dh(p16 ? static_cast<std::size_t>(n) * 2 : 0);
              dp.upload(p.data(), p.size() * 4);
              dm.upload(m.data(), m.size() * 4);
              launch_lion_step(dp.as<float>(), dg.get(), gd, dm.as<float>(), n, c,
                               p16 ? dh.get() : nullptr, hd, nullptr);
              expect_ok(ws);
              std::vector<unsigned char> o = dp.raw();
              append(o, dm.raw());
              if (p16) append(o, dh.raw());
              return o;
            }, n == kBig ? 2 : 3);
            const std::size_t b = static_cast<std::size_t>(n) * 4;
            expect_bits(ws + " master", arr_from(out, 0, DT::f32, n), as_arr(rp));
            expect_bits(ws + " m", arr_from(out, b, DT::f32, n), as_arr(rm));
            if (p16) expect_bits(ws + " param16", arr_from(out, 2 * b, hd, n), round16(rp, hd));
            p = rp;
            m = rm;
          }
        }
}

// ---- the 8-bit updates ----

constexpr std::int64_t kQ = static_cast<std::int64_t>(optim::kQuantBlock);
// Within one block, one block exactly, one element past it, several blocks with a tail.
constexpr std::int64_t kQ8Sizes[] = {1, 300, kQ, kQ + 1, 3 * kQ + 517};

// Decay runs over [0, n): all decayed, or alternating runs whose edges fall inside blocks (and one
// of a single element).
// The decay runs of a test: kind 0 one decayed run; 1 a few runs (fewer than kQ8InlineRuns: the
// kernels get them by value); 2 a run every 37 elements (above kQ8InlineRuns once n > 1184: the
// kernels read them from device memory).
std::vector<optim::DecayRun> decay_runs(std::int64_t n, int kind) {
  const auto un = static_cast<std::size_t>(n);
  if (kind == 0 || n < 3) return {{0, un, true}};
  std::vector<optim::DecayRun> r;
  if (kind == 2) {
    bool d = true;
    for (std::size_t b = 0; b < un; b += 37, d = !d) r.push_back({b, std::min(b + 37, un), d});
    return r;
  }
  const std::size_t cuts[] = {0, 7, 8, 1500, 2100, 2101, 4095, 6000};
  bool d = false;
  for (std::size_t k = 0; k < std::size(cuts); ++k) {
    if (cuts[k] >= un) break;
    const std::size_t e = k + 1 < std::size(cuts) ? std::min(cuts[k + 1], un) : un;
    r.push_back({cuts[k], e, d});
    d = !d;
  }
  r.back().end = un;
  return r;
}
const char* const kRunKinds[] = {"one", "mixed", "many"};

// Bitwise equality of byte arrays.
void expect_bytes(const std::string& what, const std::vector<unsigned char>& got,
                  const unsigned char* ref, std::size_t n) {
  checked(static_cast<long long>(n));
  for (std::size_t i = 0; i < n; ++i)
    if (got[i] != ref[i]) {
      fail("%s: byte %zu is %u, the CPU's %u", what.c_str(), i, got[i], ref[i]);
      return;
    }
}

std::vector<unsigned char> bytes_at(const std::vector<unsigned char>& v, std::size_t off, std::size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(off), v.begin() + static_cast<std::ptrdiff_t>(off + n)};
}

// A quantized random state of n elements (signed for m, unsigned for v), with an all-zero block
// when there are several.
void random_state(optim::QuantMap map, std::int64_t n, float scale, std::mt19937& g,
                  std::vector<std::uint8_t>& codes, std::vector<float>& absmax) {
  std::vector<float> x = random_arr(DT::f32, n, g, scale).f32();
  if (map == optim::QuantMap::unsigned_dynamic)
    for (float& v : x) v = v * v;
  if (n > kQ) std::fill(x.begin() + kQ, x.begin() + std::min<std::int64_t>(2 * kQ, n), 0.0f);
  codes.assign(static_cast<std::size_t>(n), 0);
  absmax.assign(optim::quant_blocks(static_cast<std::size_t>(n)), 0.0f);
  optim::quantize_blockwise(map, x.data(), static_cast<std::size_t>(n), codes.data(), absmax.data());
}

// The runs as the op layer gives them: by value when they fit, else their words in device memory
// (the returned buffer, which `runs` points into). The codes: ensure_q8_codes, as the op does.
DevBuf runs_buf(const std::vector<optim::DecayRun>& dr, Q8Runs& runs) {
  std::vector<std::int64_t> enc;
  for (const auto& r : dr) enc.push_back(static_cast<std::int64_t>(r.end) << 1 | (r.decay ? 1 : 0));
  const int n = static_cast<int>(enc.size());
  DevBuf d;
  if (n > kQ8InlineRuns) {
    d = DevBuf(enc.size() * 8);
    d.upload(enc.data(), enc.size() * 8);
  }
  runs = q8_runs(enc.data(), n, n > kQ8InlineRuns ? d.as<std::int64_t>() : nullptr);
  if (runs.is_inline() != (n <= kQ8InlineRuns)) fail("q8_runs: by value iff the runs fit");
  if (ensure_q8_codes() != cudaSuccess) fail("ensure_q8_codes failed");
  return d;
}

EMU_TEST("optimizer", adamw8bit) {
  std::mt19937 g(64);
  struct H {
    optim::AdamWHyper h;
    float grad_scale;
  };
  const H hypers[] = {{optim::AdamWHyper{1e-3, 0.9, 0.999, 1e-8, 0.0, true}, 1.0f},
                      {optim::AdamWHyper{1e-2, 0.9, 0.999, 1e-8, 0.1, true}, 0.5f},
                      {optim::AdamWHyper{3e-4, 0.3, 0.95, 1e-6, 0.05, false}, 0.25f}};  // w >= 0.5
  for (std::int64_t n : kQ8Sizes)
    for (std::size_t hi = 0; hi < std::size(hypers); ++hi)
      for (int kind = 0; kind < 3; ++kind)
        for (DT gd : kFloatDTs)
          for (int p16 = 0; p16 < 3; ++p16) {
            if (n > kQ && (p16 == 1) != (gd == DT::bf16)) continue;  // fewer of the large ones
            const DT hd = p16 == 2 ? DT::f16 : DT::bf16;
            const H& hy = hypers[hi];
            const auto un = static_cast<std::size_t>(n);
            const std::vector<optim::DecayRun> runs = decay_runs(n, kind);
            std::vector<float> p = random_arr(DT::f32, n, g).f32(), ma, va;
            std::vector<std::uint8_t> mq, vq;
            random_state(optim::QuantMap::signed_dynamic, n, 0.01f, g, mq, ma);
            random_state(optim::QuantMap::unsigned_dynamic, n, 0.03f, g, vq, va);
            const std::size_t nb = ma.size();
            const std::string what = fmt("adamw8bit n=%lld hyper %zu runs %s grad %s param16 %s",
                                         static_cast<long long>(n), hi, kRunKinds[kind],
                                         name(gd), p16 ? name(hd) : "-");
            for (std::int64_t step = 1; step <= 2; ++step) {
              const HostArr gr = grads(gd, n, g);
              std::vector<float> rp = p, rma = ma, rva = va;
              std::vector<std::uint8_t> rmq = mq, rvq = vq;
              std::vector<std::uint16_t> r16(p16 ? un : 0);
              const optim::Quant8Moments q{rmq.data(), rvq.data(), rma.data(), rva.data()};
              optim::adamw8bit_step(rp.data(), gr.data(), q, un, runs, hy.h, step, hy.grad_scale,
                                    p16 ? r16.data() : nullptr, dtype(hd), dtype(gd));
              optim::AdamWHyper h0 = hy.h;
              h0.weight_decay = 0;
              const auto cd = optim::detail::adamw_consts(hy.h, step, hy.grad_scale);
              const auto cn = optim::detail::adamw_consts(h0, step, hy.grad_scale);
              const std::string ws = what + fmt(" step %lld", static_cast<long long>(step));
              const auto out = run_orders(ws, [&] {
                DevBuf dp(un * 4), dmq(un), dvq(un), dma(nb * 4), dva(nb * 4), dg(gr),
                    dh(p16 ? un * 2 : 0);
                dp.upload(p.data(), un * 4);
                dmq.upload(mq.data(), un);
                dvq.upload(vq.data(), un);
                dma.upload(ma.data(), nb * 4);
                dva.upload(va.data(), nb * 4);
                Q8Runs druns;
                const DevBuf aux = runs_buf(runs, druns);
                launch_adamw8bit_step(dp.as<float>(), dg.get(), gd, dmq.as<std::uint8_t>(),
                                      dvq.as<std::uint8_t>(), dma.as<float>(), dva.as<float>(), n,
                                      druns, cd, cn,
                                      p16 ? dh.get() : nullptr, hd, nullptr);
                expect_ok(ws);
                std::vector<unsigned char> o = dp.raw();
                append(o, dmq.raw());
                append(o, dvq.raw());
                append(o, dma.raw());
                append(o, dva.raw());
                if (p16) append(o, dh.raw());
                return o;
              }, n > kQ ? 2 : 3);
              std::size_t at = 0;
              expect_bits(ws + " master", arr_from(out, at, DT::f32, n), as_arr(rp));
              at += un * 4;
              expect_bytes(ws + " m codes", bytes_at(out, at, un), rmq.data(), un);
              at += un;
              expect_bytes(ws + " v codes", bytes_at(out, at, un), rvq.data(), un);
              at += un;
              expect_bytes(ws + " m absmax", bytes_at(out, at, nb * 4),
                           reinterpret_cast<const unsigned char*>(rma.data()), nb * 4);
              at += nb * 4;
              expect_bytes(ws + " v absmax", bytes_at(out, at, nb * 4),
                           reinterpret_cast<const unsigned char*>(rva.data()), nb * 4);
              at += nb * 4;
              if (p16)
                expect_bytes(ws + " param16", bytes_at(out, at, un * 2),
                             reinterpret_cast<const unsigned char*>(r16.data()), un * 2);
              p = rp;
              mq = rmq;
              vq = rvq;
              ma = rma;
              va = rva;
            }
          }
}

EMU_TEST("optimizer", lion8bit) {
  std::mt19937 g(65);
  const optim::LionHyper hypers[] = {{1e-3, 0.9, 0.99, 0.0}, {3e-4, 0.95, 0.98, 0.1}};
  const float scales[] = {1.0f, 0.5f};
  for (std::int64_t n : kQ8Sizes)
    for (std::size_t hi = 0; hi < std::size(hypers); ++hi)
      for (int kind = 0; kind < 3; ++kind)
        for (DT gd : kFloatDTs)
          for (int p16 = 0; p16 < 3; ++p16) {
            if (n > kQ && (p16 == 1) != (gd == DT::bf16)) continue;
            const DT hd = p16 == 2 ? DT::f16 : DT::bf16;
            const auto un = static_cast<std::size_t>(n);
            const std::vector<optim::DecayRun> runs = decay_runs(n, kind);
            std::vector<float> p = random_arr(DT::f32, n, g).f32(), ma;
            std::vector<std::uint8_t> mq;
            random_state(optim::QuantMap::signed_dynamic, n, 0.01f, g, mq, ma);
            const std::size_t nb = ma.size();
            const std::string what = fmt("lion8bit n=%lld hyper %zu runs %s grad %s param16 %s",
                                         static_cast<long long>(n), hi, kRunKinds[kind],
                                         name(gd), p16 ? name(hd) : "-");
            for (std::int64_t step = 1; step <= 2; ++step) {
              const HostArr gr = grads(gd, n, g);
              std::vector<float> rp = p, rma = ma;
              std::vector<std::uint8_t> rmq = mq;
              std::vector<std::uint16_t> r16(p16 ? un : 0);
              optim::lion8bit_step(rp.data(), gr.data(), rmq.data(), rma.data(), un, runs,
                                   hypers[hi], step, scales[hi], p16 ? r16.data() : nullptr,
                                   dtype(hd), dtype(gd));
              const auto cd = optim::detail::lion_consts(hypers[hi], step, scales[hi]);
              auto cn = cd;
              cn.decay = 1.0f;
              const std::string ws = what + fmt(" step %lld", static_cast<long long>(step));
              const auto out = run_orders(ws, [&] {
                DevBuf dp(un * 4), dmq(un), dma(nb * 4), dg(gr), dh(p16 ? un * 2 : 0);
                dp.upload(p.data(), un * 4);
                dmq.upload(mq.data(), un);
                dma.upload(ma.data(), nb * 4);
                Q8Runs druns;
                const DevBuf aux = runs_buf(runs, druns);
                launch_lion8bit_step(dp.as<float>(), dg.get(), gd, dmq.as<std::uint8_t>(),
                                     dma.as<float>(), n, druns, cd, cn, p16 ? dh.get() : nullptr, hd, nullptr);
                expect_ok(ws);
                std::vector<unsigned char> o = dp.raw();
                append(o, dmq.raw());
                append(o, dma.raw());
                if (p16) append(o, dh.raw());
                return o;
              }, n > kQ ? 2 : 3);
              std::size_t at = 0;
              expect_bits(ws + " master", arr_from(out, at, DT::f32, n), as_arr(rp));
              at += un * 4;
              expect_bytes(ws + " m codes", bytes_at(out, at, un), rmq.data(), un);
              at += un;
              expect_bytes(ws + " m absmax", bytes_at(out, at, nb * 4),
                           reinterpret_cast<const unsigned char*>(rma.data()), nb * 4);
              at += nb * 4;
              if (p16)
                expect_bytes(ws + " param16", bytes_at(out, at, un * 2),
                             reinterpret_cast<const unsigned char*>(r16.data()), un * 2);
              p = rp;
              mq = rmq;
              ma = rma;
            }
          }
}

// Every normalized value's byte: q8_byte (the kernels' threshold search) against the CPU's
// quantize_reference and its fast cell-table path, over the codes' values, the thresholds and
// their neighbours, the edges (0, ±1, tiny, denormal) and random draws.
EMU_TEST("optimizer", q8_byte) {
  std::mt19937 g(66);
  for (const optim::QuantMap map : {optim::QuantMap::signed_dynamic, optim::QuantMap::unsigned_dynamic}) {
    const Q8Code c = q8_code(map);
    std::vector<float> ys = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, -1e-30f, 1e-40f, 0.5f, -0.5f};
    for (float v : optim::quant_sorted_values(map)) ys.push_back(v);
    for (float t : optim::quant_thresholds(map))
      for (float y : {t, std::nextafter(t, 0.0f), std::nextafter(t, 2.0f)}) {
        ys.push_back(y);
        ys.push_back(-y);
      }
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int k = 0; k < 20000; ++k) ys.push_back(u(g) * std::pow(10.0f, -static_cast<float>(k % 8)));
    const bool sgn = map == optim::QuantMap::signed_dynamic;
    checked(static_cast<long long>(ys.size()));
    int bad = 0;
    for (float y : ys) {
      const std::uint8_t got = q8_byte(c.thresholds, c.k, sgn, y);
      const std::uint8_t want = optim::quantize_reference(map, y);
      // The fast path on a block of {y, 1}: absmax 1, so it quantizes y itself.
      const float x[2] = {y, 1.0f};
      std::uint8_t fast[2];
      optim::quantize_block(map, x, 2, fast);
      if ((got != want || got != fast[0]) && bad++ < 5)
        fail("q8_byte %s y=%a: %u, reference %u, CPU %u", sgn ? "signed" : "unsigned",
             static_cast<double>(y), got, want, fast[0]);
    }
  }
}

}  // namespace
}  // namespace cuda_emu_test
