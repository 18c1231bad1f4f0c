// attention.cu against a double-precision reference computed from the same (widened) inputs:
// the forward (out, lse) and the backward (dqkv from the kernel's own out and lse), every padded
// head size (16, 32, 64, 128), sequence tails of every tile, dtype mixes; the dynamic shared
// memory opt-in (above 48 KB) checked against an H100's limits and a T4's (64 KB). The emulated
// device is an H100, so 16-bit qkv (with dout of the same type) runs the tensor-core kernels of
// attention_mma.cu (mma.cuh's portable products; their fragment layouts checked against a plain
// triple loop here); f32 or mixed operands and the T4 run the FFMA kernels. The rounded form
// (strata.allow_rounded_attention: P and dS rounded to 16 bits once, as FlashAttention) is
// checked against the same reference with the tolerance its rounding allows, and shown to round.
#include <cmath>
#include <cstdio>

#include "framework/backend/cuda/ops/attention.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_selftest {
void mma16816(bool bf16, const std::uint16_t* a, const std::uint16_t* b, float* c);
}  // namespace cuda_emu_selftest

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

struct Case {
  int B, T, NH, hs;
  DT q, o, g, d;  // qkv, out, dout, dqkv
};

// The largest |got - ref| / max|ref| of the last compare (reported by the tensor-core tests).
double g_last_rel = 0.0;

// What run_case measured: the largest error over max|ref| of out and of dqkv, and the raw bytes
// of the forward's outputs (out, lse) and of the backward's dqkv.
struct CaseResult {
  double out_rel = 0, dqkv_rel = 0;
  std::vector<unsigned char> fwd, bwd;
};

// Tolerance: |got - ref| <= rtol * max|ref| (+ half an ulp of a 16-bit output).
void compare(const std::string& what, const HostArr& got, const std::vector<double>& ref, double rtol) {
  double mx = 0;
  for (double r : ref) mx = std::max(mx, std::fabs(r));
  double err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    err = std::max(err, std::fabs(static_cast<double>(got.get(static_cast<std::int64_t>(i))) - ref[i]));
  g_last_rel = mx > 0 ? err / mx : err;
  expect_close(what, got, ref, 0.0, rtol * mx);
}

CaseResult run_case(const Case& c, int orders, double fwd_rtol = 2e-6, double bwd_rtol = 4e-6,
                    bool rounded = false) {
  const int B = c.B, T = c.T, NH = c.NH, hs = c.hs, C = NH * hs;
  const std::int64_t nq = std::int64_t{B} * T * 3 * C, no = std::int64_t{B} * T * C,
                     nl = std::int64_t{B} * NH * T;
  std::mt19937 g(static_cast<unsigned>(B * 1000003 + T * 1009 + NH * 31 + hs));
  const HostArr qkv = random_arr(c.q, nq, g), dout = random_arr(c.g, no, g);
  const std::string what = fmt("attention B=%d T=%d NH=%d hs=%d qkv %s out %s dout %s dqkv %s", B,
                               T, NH, hs, name(c.q), name(c.o), name(c.g), name(c.d));
  const auto fwd = run_orders(what + " forward", [&] {
    DevBuf dq(qkv), dout_b(static_cast<std::size_t>(no) * size_of(c.o)), dl(static_cast<std::size_t>(nl) * 4);
    const cudaError_t e = launch_attention_forward(dq.get(), c.q, dout_b.get(), c.o, dl.as<float>(),
                                                   B, T, C, NH, nullptr, rounded);
    expect_ok(what + " forward", e);
    std::vector<unsigned char> o = dout_b.raw();
    append(o, dl.raw());
    return o;
  }, orders);
  const HostArr out = arr_from(fwd, 0, c.o, no);
  const HostArr lse = arr_from(fwd, static_cast<std::size_t>(no) * size_of(c.o), DT::f32, nl);

  const double scale = 1.0f / std::sqrt(static_cast<float>(hs));
  auto Q = [&](int b, int t, int h, int d) { return static_cast<double>(qkv.get((std::int64_t{b} * T + t) * 3 * C + h * hs + d)); };
  auto K = [&](int b, int t, int h, int d) { return static_cast<double>(qkv.get((std::int64_t{b} * T + t) * 3 * C + C + h * hs + d)); };
  auto Vv = [&](int b, int t, int h, int d) { return static_cast<double>(qkv.get((std::int64_t{b} * T + t) * 3 * C + 2 * C + h * hs + d)); };
  std::vector<double> ro(static_cast<std::size_t>(no)), rl(static_cast<std::size_t>(nl)), s(static_cast<std::size_t>(T));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        double m = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          double a = 0;
          for (int d = 0; d < hs; ++d) a += Q(b, t, h, d) * K(b, j, h, d);
          s[static_cast<std::size_t>(j)] = a * scale;
          m = std::max(m, s[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += std::exp(s[static_cast<std::size_t>(j)] - m);
        rl[static_cast<std::size_t>((std::int64_t{b} * NH + h) * T + t)] = m + std::log(sum);
        for (int d = 0; d < hs; ++d) {
          double o = 0;
          for (int j = 0; j <= t; ++j) o += std::exp(s[static_cast<std::size_t>(j)] - m) / sum * Vv(b, j, h, d);
          ro[static_cast<std::size_t>((std::int64_t{b} * T + t) * C + h * hs + d)] = o;
        }
      }
  compare(what + " out", out, ro, fwd_rtol);
  const double out_rel = g_last_rel;
  compare(what + " lse", lse, rl, fwd_rtol);

  // The backward from the kernel's own out and lse.
  const auto bwd = run_orders(what + " backward", [&] {
    DevBuf dq(qkv), dob(out), dl(lse), dg(dout), dd(static_cast<std::size_t>(nq) * size_of(c.d)),
        ws(static_cast<std::size_t>(nl) * 4);
    const cudaError_t e =
        launch_attention_backward(dq.get(), c.q, dob.get(), c.o, dl.as<float>(), dg.get(), c.g,
                                  dd.get(), c.d, ws.as<float>(), B, T, C, NH, nullptr, rounded);
    expect_ok(what + " backward", e);
    return dd.raw();
  }, orders);
  std::vector<double> rd(static_cast<std::size_t>(nq), 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      std::vector<double> Dt(static_cast<std::size_t>(T));
      for (int t = 0; t < T; ++t) {
        double a = 0;
        for (int d = 0; d < hs; ++d) {
          const std::int64_t i = (std::int64_t{b} * T + t) * C + h * hs + d;
          a += static_cast<double>(dout.get(i)) * out.get(i);
        }
        Dt[static_cast<std::size_t>(t)] = a;
      }
      for (int t = 0; t < T; ++t) {
        const double L = lse.get((std::int64_t{b} * NH + h) * T + t);
        for (int j = 0; j <= t; ++j) {
          double a = 0, dp = 0;
          for (int d = 0; d < hs; ++d) {
            a += Q(b, t, h, d) * K(b, j, h, d);
            dp += static_cast<double>(dout.get((std::int64_t{b} * T + t) * C + h * hs + d)) * Vv(b, j, h, d);
          }
          const double p = std::exp(a * scale - L);
          const double ds = p * (dp - Dt[static_cast<std::size_t>(t)]);
          for (int d = 0; d < hs; ++d) {
            const std::int64_t qi = (std::int64_t{b} * T + t) * 3 * C + h * hs + d;
            const std::int64_t ki = (std::int64_t{b} * T + j) * 3 * C + h * hs + d;
            rd[static_cast<std::size_t>(qi)] += scale * ds * K(b, j, h, d);
            rd[static_cast<std::size_t>(ki + C)] += scale * ds * Q(b, t, h, d);
            rd[static_cast<std::size_t>(ki + 2 * C)] += p * dout.get((std::int64_t{b} * T + t) * C + h * hs + d);
          }
        }
      }
    }
  compare(what + " dqkv", arr_from(bwd, 0, c.d, nq), rd, bwd_rtol);
  if (c.q != DT::f32 && c.o == DT::f32 && c.d == DT::f32)
    std::printf("  %s%s: max error / max|ref|: out %.2e, dqkv %.2e\n", what.c_str(),
                rounded ? " rounded" : "", out_rel, g_last_rel);
  return {out_rel, g_last_rel, fwd, bwd};
}

constexpr DT F = DT::f32, BF = DT::bf16, H = DT::f16;

// A T4 (sm_75): the FFMA kernels only, 64 KB of shared memory per block.
emu::DeviceModel t4_model() {
  emu::DeviceModel t4;
  t4.cc_major = 7;
  t4.cc_minor = 5;
  t4.sms = 40;
  t4.max_smem_optin = 64 * 1024;
  return t4;
}

EMU_TEST("attention", head_sizes_and_tails) {
  // Every padded head size, with sequence lengths below, at and past the tiles (16 .. 64 rows).
  const Case cases[] = {
      {2, 5, 3, 1, F, F, F, F},     {1, 33, 3, 16, F, F, F, F},  {1, 17, 2, 17, F, F, F, F},
      {1, 65, 2, 32, F, F, F, F},   {1, 40, 2, 48, F, F, F, F},  {2, 16, 1, 64, F, F, F, F},
      {1, 70, 1, 64, F, F, F, F},   {1, 33, 1, 100, F, F, F, F}, {1, 65, 1, 128, F, F, F, F},
  };
  for (const Case& c : cases) run_case(c, c.T * c.hs > 3000 ? 2 : 3);
}

EMU_TEST("attention", dtype_mixes) {
  const Case cases[] = {
      {2, 37, 2, 24, BF, H, F, BF},
      {2, 37, 2, 24, H, F, BF, H},
      {1, 20, 2, 64, BF, BF, BF, BF},
      {1, 20, 1, 128, H, H, H, H},
  };
  for (const Case& c : cases) run_case(c, 2);
}

// mma.cuh's m16n8k16 against a triple loop: small integers (every product and sum exact: the
// result must be bitwise the loop's) and random values (to the f32 rounding of 16 fmas).
EMU_TEST("attention", mma_16816_layout) {
  std::mt19937 gen(7);
  for (const bool bf16 : {true, false}) {
    for (const bool ints : {true, false}) {
      const DT dt = bf16 ? DT::bf16 : DT::f16;
      HostArr a(dt, 16 * 16), b(dt, 16 * 8), c(DT::f32, 16 * 8);
      std::uniform_int_distribution<int> small(-8, 8);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (std::int64_t i = 0; i < a.n; ++i) a.set(i, ints ? static_cast<float>(small(gen)) : nd(gen));
      for (std::int64_t i = 0; i < b.n; ++i) b.set(i, ints ? static_cast<float>(small(gen)) : nd(gen));
      for (std::int64_t i = 0; i < c.n; ++i) c.set(i, ints ? static_cast<float>(small(gen) * 16) : nd(gen));
      std::vector<double> ref(16 * 8);
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
          double acc = c.get(m * 8 + n);
          for (int k = 0; k < 16; ++k) acc += static_cast<double>(a.get(m * 16 + k)) * b.get(k * 8 + n);
          ref[static_cast<std::size_t>(m * 8 + n)] = acc;
        }
      const std::string what = fmt("mma_16816 %s %s", bf16 ? "bf16" : "f16", ints ? "integers" : "random");
      const auto got = run_orders(what, [&] {
        DevBuf da(a), db(b), dc(c);
        cuda_emu_selftest::mma16816(bf16, da.as<std::uint16_t>(), db.as<std::uint16_t>(), dc.as<float>());
        checked();
        return dc.raw();
      });
      const HostArr out = arr_from(got, 0, DT::f32, 16 * 8);
      if (ints) {
        HostArr r(DT::f32, 16 * 8);
        for (std::int64_t i = 0; i < r.n; ++i) r.set(i, static_cast<float>(ref[static_cast<std::size_t>(i)]));
        expect_bits(what, out, r);
      } else {
        expect_close(what, out, ref, 1e-6, 1e-5);
      }
    }
  }
}

// The tensor-core kernels (16-bit qkv and dout of one type): every padded head size and sizes
// between, tails of the 64-row blocks and of the 32- and 64-row tiles, T = 1, several batches and
// heads; head sizes that are no multiple of 4 (the tiles' element-wise loads, not the 8-byte
// ones) or of 8 (8-byte loads, not cp.async's 16 bytes); T past two tiles (a double buffer's stage
// refilled); f32 outputs (the accuracy of the hi/lo split shows) and 16-bit ones.
EMU_TEST("attention", tensor_cores) {
  for (const DT t : {BF, H}) {
    const Case cases[] = {
        {2, 1, 2, 16, t, F, t, F},   {1, 33, 3, 16, t, F, t, F},  {2, 65, 2, 32, t, F, t, F},
        {1, 40, 2, 48, t, F, t, F},  {1, 70, 1, 64, t, F, t, F},  {2, 64, 2, 64, t, t, t, t},
        {1, 100, 1, 64, t, t, t, t}, {1, 33, 1, 100, t, F, t, F}, {1, 65, 1, 128, t, F, t, F},
        {2, 97, 1, 128, t, t, t, t}, {1, 50, 2, 30, t, F, t, F},  {2, 9, 2, 1, t, F, t, F},
        // Three or more key and query tiles of 64: a stage refilled while the other is read
        // (cp.async's 16-byte copies at head size 64; 8-byte loads at 20).
        {1, 200, 1, 64, t, t, t, t}, {1, 140, 1, 20, t, F, t, F},
    };
    for (const Case& c : cases) run_case(c, c.T * c.hs * c.B * c.NH > 6000 ? 2 : 3, 1e-5, 1e-5);
  }
}

// The rounded form (P and dS rounded to 16 bits once before their products): within the error
// that rounding allows of the exact reference, yet measurably less exact than the split form
// (which stays under 1e-5): the mode is not ignored. f32 operands (the FFMA kernels) and a T4
// compute in f32 either way: bitwise the unrounded results.
EMU_TEST("attention", rounded_products) {
  for (const DT t : {BF, H}) {
    // bf16 rounds each P and dS to 8 bits (2^-9 relative), f16 to 11 (2^-12); errors average out
    // over the keys. Seen on the emulator: bf16 out 6e-4 .. 1.2e-3, dqkv 7e-4 .. 2.0e-3; f16 out
    // 7e-5 .. 1.5e-4, dqkv 7e-5 .. 2.7e-4; the split form's 1e-7 .. 4e-6. Bounds about 10 times
    // that.
    const double tol = t == BF ? 2e-2 : 3e-3, least = t == BF ? 1e-4 : 1e-5;
    // (Two scheduling orders each: the emulator's time, which ctest's 300 s bound includes.)
    const Case cases[] = {
        {1, 70, 1, 64, t, F, t, F},  {2, 65, 1, 32, t, F, t, F}, {1, 200, 1, 64, t, F, t, F},
        {1, 65, 1, 128, t, F, t, F}, {2, 9, 2, 1, t, F, t, F},   {1, 64, 1, 64, t, t, t, t},
    };
    double worst_out = 0, worst_dqkv = 0;
    for (const Case& c : cases) {
      const CaseResult r = run_case(c, 2, tol, tol, true);
      if (c.o != F || c.d != F) continue;  // a 16-bit output's own rounding would hide P's
      worst_out = std::max(worst_out, r.out_rel);
      worst_dqkv = std::max(worst_dqkv, r.dqkv_rel);
    }
    // The cases with f32 outputs: the rounding shows above the split form's 1e-5 in the forward
    // and, from the forward's out and lse, in the backward alone.
    if (worst_out < least || worst_dqkv < least)
      fail("attention rounded %s: largest errors out %.2e, dqkv %.2e: no sign of P and dS rounded "
           "to 16 bits (expected above %.0e)", name(t), worst_out, worst_dqkv, least);
  }
  // The FFMA kernels: f32 qkv (with 16-bit others), and 16-bit qkv and dout on a T4 (sm_75).
  auto same_unrounded = [](const Case& c, const char* where) {
    const CaseResult a = run_case(c, 1), b = run_case(c, 1, 2e-6, 4e-6, true);
    if (a.fwd != b.fwd || a.bwd != b.bwd)
      fail("attention rounded, FFMA kernels (qkv %s, dout %s, %s): the results differ from the "
           "unrounded ones", name(c.q), name(c.g), where);
  };
  same_unrounded({1, 70, 1, 64, F, F, F, F}, "H100");
  same_unrounded({1, 40, 2, 24, F, BF, H, BF}, "H100");
  const emu::DeviceModel saved = emu::device();
  emu::set_device(t4_model());
  same_unrounded({1, 40, 2, 64, H, F, H, F}, "T4");
  emu::set_device(saved);
}

EMU_TEST("attention", smem_optin_on_a_t4) {
  // A T4 (sm_75) allows 64 KB per block: the tiles are sized for it (attention.cu).
  const emu::DeviceModel saved = emu::device();
  emu::set_device(t4_model());
  run_case({1, 70, 1, 128, F, F, F, F}, 1);
  run_case({1, 40, 2, 64, BF, F, H, F}, 1);
  emu::set_device(saved);
}

EMU_TEST("attention", smem_optin_on_sm86) {
  // An RTX 30xx (sm_86) runs the tensor-core kernels with the smallest opt-in of compute
  // capability 8.x, 99 KB (attention_mma.cu's kMmaSmemCap); the dQ kernel at head size 128 needs
  // the most (86 KB).
  emu::DeviceModel sm86;
  sm86.cc_major = 8;
  sm86.cc_minor = 6;
  sm86.sms = 84;
  sm86.max_smem_optin = 99 * 1024;
  const emu::DeviceModel saved = emu::device();
  emu::set_device(sm86);
  run_case({1, 65, 1, 128, BF, F, BF, F}, 1, 1e-5, 1e-5);
  run_case({1, 70, 2, 64, H, H, H, H}, 1, 1e-5, 1e-5);
  emu::set_device(saved);
}

EMU_TEST("attention", build_without_tensor_core_code) {
  // A build for sm_75 alone on an H100: the driver compiles compute_75's PTX for it, in which the
  // tensor-core kernels are empty (mma.cuh), so the FFMA kernels must run. They ignore the rounded
  // flag and the tensor-core ones do not: rounded and unrounded results are the same bits with
  // that code, and differ with code built for sm_90.
  const Case c{1, 70, 1, 64, BF, F, BF, F};
  const emu::DeviceModel saved = emu::device();
  emu::DeviceModel old_code = saved;
  old_code.ptx_version = 75;
  emu::set_device(old_code);
  const CaseResult a = run_case(c, 1), b = run_case(c, 1, 2e-6, 4e-6, true);
  if (a.fwd != b.fwd || a.bwd != b.bwd)
    fail("attention with code from compute_75 on an sm_90 device: the rounded flag changed the "
         "results, so the (empty) tensor-core kernels were chosen");
  emu::set_device(saved);
  const CaseResult m = run_case(c, 1, 2e-2, 2e-2, true);  // (rounded_products's bounds)
  if (m.fwd == a.fwd)
    fail("attention with code for sm_90: the rounded flag changed nothing (the test cannot tell "
         "the kernels apart)");
}

EMU_TEST("attention", bad_sizes) {
  DevBuf d(64);
  for (auto [C, NH] : {std::pair<int, int>{10, 3}, {0, 1}, {129, 1}, {8, 0}}) {
    const cudaError_t e = launch_attention_forward(d.get(), F, d.get(), F, d.as<float>(), 1, 1, C,
                                                   NH, nullptr);
    checked();
    if (e != cudaErrorInvalidValue) fail("attention C=%d NH=%d: %s", C, NH, cudaGetErrorName(e));
  }
  expect_ok("attention B=0", launch_attention_forward(d.get(), F, d.get(), F, d.as<float>(), 0, 4, 8, 1, nullptr));
  expect_ok("attention T=0", launch_attention_backward(d.get(), F, d.get(), F, d.as<float>(), d.get(), F, d.get(), F, d.as<float>(), 2, 0, 8, 1, nullptr));
}

}  // namespace
}  // namespace cuda_emu_test
