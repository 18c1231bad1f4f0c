// gelu.cu against the CPU's mixed-dtype GELU (backend/cpu): every dtype mix, in place (y == x,
// dx == dy). The CPU's exp is a polynomial within about an ulp of expf's, so f32 results agree
// to a few ulps (and 16-bit ones to one unit of their last place).
#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/cuda/ops/gelu.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

constexpr double kRtol = 4e-6;
constexpr double kAtol = 1e-30;  // where the CPU's clamped exp leaves a subnormal and expf inf

HostArr gelu_inputs(std::int64_t n, std::mt19937& g) {
  HostArr x = random_arr(DT::f32, n, g, 3.0f);
  const float sp[] = {0.0f, -0.0f, 1e-20f, -1e-20f, 10.0f, -10.0f, 5.5f, -5.5f, 40.0f, -40.0f};
  for (std::size_t i = 0; i < std::size(sp) && static_cast<std::int64_t>(i) < n; ++i)
    x.set(static_cast<std::int64_t>(i) * 7 % n, sp[i]);
  return x;
}

std::vector<double> widened(const HostArr& a) {
  std::vector<double> v(static_cast<std::size_t>(a.n));
  for (std::int64_t i = 0; i < a.n; ++i) v[static_cast<std::size_t>(i)] = a.get(i);
  return v;
}

EMU_TEST("gelu", forward_every_mix) {
  std::mt19937 g(11);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{255}, std::int64_t{257}, std::int64_t{3000}})
    for (DT xd : kFloatDTs)
      for (DT yd : kFloatDTs)
        for (bool inplace : {false, true}) {
          if (inplace && xd != yd) continue;
          const HostArr x = convert_arr(gelu_inputs(n, g), xd);
          HostArr ref(yd, n);
          strata::cpu::gelu_forward({x.data(), dtype(xd)}, {ref.data(), dtype(yd)},
                                    static_cast<std::size_t>(n));
          const std::string what = fmt("gelu_forward %s->%s n=%lld%s", name(xd), name(yd),
                                       static_cast<long long>(n), inplace ? " in place" : "");
          const auto out = run_orders(what, [&] {
            DevBuf dx(x), dy(static_cast<std::size_t>(n) * size_of(yd));
            void* y = inplace ? dx.get() : dy.get();
            launch_gelu_forward(dx.get(), xd, y, yd, n, nullptr);
            expect_ok(what);
            return inplace ? dx.raw() : dy.raw();
          });
          expect_close(what, arr_from(out, 0, yd, n), widened(ref), kRtol, kAtol);
        }
}

EMU_TEST("gelu", backward_every_mix) {
  std::mt19937 g(12);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{257}, std::int64_t{3000}})
    for (DT xd : kFloatDTs)
      for (DT gd : kFloatDTs)
        for (DT dd : kFloatDTs)
          for (bool inplace : {false, true}) {
            if (inplace && gd != dd) continue;  // dx == dy
            const HostArr x = convert_arr(gelu_inputs(n, g), xd);
            const HostArr dy = random_arr(gd, n, g);
            HostArr ref(dd, n);
            strata::cpu::gelu_backward({x.data(), dtype(xd)}, {dy.data(), dtype(gd)},
                                       {ref.data(), dtype(dd)}, static_cast<std::size_t>(n));
            const std::string what =
                fmt("gelu_backward x %s dy %s -> dx %s n=%lld%s", name(xd), name(gd), name(dd),
                    static_cast<long long>(n), inplace ? " (dx == dy)" : "");
            const auto out = run_orders(what, [&] {
              DevBuf bx(x), bg(dy), bd(static_cast<std::size_t>(n) * size_of(dd));
              void* dx = inplace ? bg.get() : bd.get();
              launch_gelu_backward(bx.get(), xd, bg.get(), gd, dx, dd, n, nullptr);
              expect_ok(what);
              return inplace ? bg.raw() : bd.raw();
            });
            // gelu' crosses zero: near there the CPU's vectorised exp and expf differ by more
            // than kRtol of the value; the op harness's rule bounds that by the output's scale.
            const std::vector<double> r = widened(ref);
            double scale = 0;
            for (double v : r)
              if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
            expect_close(what, arr_from(out, 0, dd, n), r, kRtol, kAtol + kRtol * scale);
          }
  launch_gelu_forward(nullptr, DT::f32, nullptr, DT::f32, 0, nullptr);
  launch_gelu_backward(nullptr, DT::f32, nullptr, DT::f32, nullptr, DT::f32, 0, nullptr);
  expect_ok("gelu n=0");
}

EMU_TEST("gelu", misaligned_views_same_bits) {
  // map8.cuh's two paths (8 elements a thread with 16-byte accesses when every operand is
  // 16-byte aligned, one a thread otherwise) compute each element with the same code: a view one
  // element into its buffer gives the same bits as an aligned one.
  std::mt19937 g(13);
  for (std::int64_t n : {std::int64_t{9}, std::int64_t{263}})
    for (DT xd : kFloatDTs)
      for (DT dd : kFloatDTs) {
        const HostArr x = convert_arr(gelu_inputs(n, g), xd);
        const HostArr dy = random_arr(DT::f32, n, g);
        const std::string what = fmt("gelu %s->%s n=%lld", name(xd), name(dd), static_cast<long long>(n));
        std::vector<HostArr> got;
        for (std::size_t shift : {std::size_t{0}, size_of(xd)}) {
          DevBuf bx(x.bytes.size() + 16), bg(dy.bytes.size() + 16),
              by(static_cast<std::size_t>(n) * size_of(dd) + 16),
              bd(static_cast<std::size_t>(n) * size_of(dd) + 16);
          bx.upload(x, shift);
          bg.upload(dy);
          const void* px = static_cast<char*>(bx.get()) + shift;
          launch_gelu_forward(px, xd, by.get(), dd, n, nullptr);
          launch_gelu_backward(px, xd, bg.get(), DT::f32, bd.get(), dd, n, nullptr);
          expect_ok(what);
          got.push_back(by.download(dd, n));
          got.push_back(bd.download(dd, n));
        }
        expect_bits(what + " forward", got[2], got[0]);
        expect_bits(what + " backward", got[3], got[1]);
      }
}

EMU_TEST("gelu", non_finite_inputs) {
  // +inf -> +inf and NaN -> NaN on both; -inf: the GPU's exact expf gives inf * 0 = NaN, the
  // CPU's exp (clamped at 88.3) a finite tiny s and -inf: reported, not compared.
  const float inf = std::numeric_limits<float>::infinity();
  HostArr x(DT::f32, 3);
  x.set(0, inf);
  x.set(1, std::nanf(""));
  x.set(2, -inf);
  DevBuf dx(x), dy(12);
  launch_gelu_forward(dx.get(), DT::f32, dy.get(), DT::f32, 3, nullptr);
  expect_ok("gelu_forward inf");
  const HostArr y = dy.download(DT::f32, 3);
  checked();
  if (!(y.get(0) == inf && std::isnan(y.get(1))))
    fail("gelu_forward(+inf, NaN) = %g, %g", y.get(0), y.get(1));
  HostArr ref(DT::f32, 3);
  strata::cpu::gelu_forward({x.data(), DType::f32}, {ref.data(), DType::f32}, 3);
  std::printf("  note: gelu_forward(-inf) = %g on the emulated GPU, %g on the CPU\n", y.get(2),
              ref.get(2));
}

}  // namespace
}  // namespace cuda_emu_test
