// elementwise.cu (convert, accumulate, add, add in place, scale) and fill.cu against the CPU:
// strata::convert and the mixed-dtype kernels of backend/cpu (bitwise: the same conversions and
// one f32 operation per element).
#include <cmath>
#include <cstring>
#include <limits>

#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/cuda/ops/elementwise.hpp"
#include "framework/core/convert.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace strata::cuda {
cudaError_t fill_async_impl(void* dst, const void* pattern, std::size_t pattern_bytes,
                            std::size_t count, void* stream);  // fill.cu
}

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

// Sizes: one element, a partial block, exactly one block, one more, several blocks with a tail.
constexpr std::int64_t kSizes[] = {1, 5, 255, 256, 257, 1000, 3 * 256 + 17};

// Values that exercise the conversions: signed zeros, infinities, NaNs, f32/f16/bf16 subnormals,
// the f16 overflow edge, ties in both 16-bit formats, then random values of several magnitudes.
HostArr special_values(std::int64_t n, std::mt19937& g) {
  HostArr a(DT::f32, n);
  const float inf = std::numeric_limits<float>::infinity();
  const float sp[] = {0.0f,         -0.0f,         inf,          -inf,
                      std::nanf(""), -std::nanf("1"), 1e-40f,       -3e-42f,
                      6e-8f,        3e-8f,         2.9802322e-8f, 1e-5f,
                      65504.0f,     65519.0f,      65520.0f,      -70000.0f,
                      1.00390625f,  1.01171875f,   1.00048828125f, 1.00146484375f,
                      3.0e38f,      -3.4e38f,      1.0f,          -1.0f};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-30, 30);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i < static_cast<std::int64_t>(std::size(sp))) a.set(i, sp[i]);
    else a.set(i, std::ldexp(nd(g), ex(g)));
  }
  return a;
}

EMU_TEST("elementwise", convert_every_pair) {
  std::mt19937 g(1);
  for (std::int64_t n : kSizes)
    for (DT s : kFloatDTs)
      for (DT d : kFloatDTs) {
        const HostArr src = convert_arr(special_values(n, g), s);
        HostArr ref(d, n);
        strata::convert(src.data(), dtype(s), ref.data(), dtype(d), static_cast<std::size_t>(n));
        const std::string what = fmt("convert %s->%s n=%lld", name(s), name(d), static_cast<long long>(n));
        const auto out = run_orders(what, [&] {
          DevBuf ds(src), dd(static_cast<std::size_t>(n) * size_of(d));
          launch_convert(ds.get(), s, dd.get(), d, n, nullptr);
          expect_ok(what);
          return dd.raw();
        });
        expect_bits(what, arr_from(out, 0, d, n), ref, /*nan_any=*/false);
      }
  // n = 0 queues nothing.
  launch_convert(nullptr, DT::f32, nullptr, DT::bf16, 0, nullptr);
  expect_ok("convert n=0");
}

EMU_TEST("elementwise", accumulate) {
  // dst = round(dst + add): the commit of an f32 accumulator into a tensor of any dtype (the
  // CPU's Acc32::commit is cpu::add_inplace with an f32 operand).
  std::mt19937 g(2);
  for (std::int64_t n : kSizes)
    for (DT d : kFloatDTs) {
      const HostArr dst = random_arr(d, n, g, 3.0f);
      const HostArr add = random_arr(DT::f32, n, g, 0.01f);
      HostArr ref = dst;
      strata::cpu::add_inplace({ref.data(), dtype(d)}, {add.data(), DType::f32},
                               static_cast<std::size_t>(n));
      const std::string what = fmt("accumulate %s n=%lld", name(d), static_cast<long long>(n));
      const auto out = run_orders(what, [&] {
        DevBuf dd(dst), da(add);
        launch_accumulate(dd.get(), d, da.as<float>(), n, nullptr);
        expect_ok(what);
        return dd.raw();
      });
      expect_bits(what, arr_from(out, 0, d, n), ref);
    }
}

EMU_TEST("elementwise", add_every_dtype_mix) {
  std::mt19937 g(3);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{257}, std::int64_t{1000}})
    for (DT a : kFloatDTs)
      for (DT b : kFloatDTs)
        for (DT o : kFloatDTs) {
          const HostArr A = random_arr(a, n, g), B = random_arr(b, n, g, 0.3f);
          HostArr ref(o, n);
          strata::cpu::add({A.data(), dtype(a)}, {B.data(), dtype(b)}, {ref.data(), dtype(o)},
                           static_cast<std::size_t>(n));
          const std::string what = fmt("add %s+%s->%s n=%lld", name(a), name(b), name(o),
                                       static_cast<long long>(n));
          const auto out = run_orders(what, [&] {
            DevBuf da(A), db(B), dout(static_cast<std::size_t>(n) * size_of(o));
            launch_add(da.get(), a, db.get(), b, dout.get(), o, n, nullptr);
            expect_ok(what);
            return dout.raw();
          });
          expect_bits(what, arr_from(out, 0, o, n), ref);
        }
}

EMU_TEST("elementwise", add_inplace_aliasing) {
  // add_inplace(a, b): launch_add with out == a (elementwise_op.cpp); also out == b.
  std::mt19937 g(4);
  for (std::int64_t n : kSizes)
    for (DT a : kFloatDTs)
      for (DT b : kFloatDTs) {
        const HostArr A = random_arr(a, n, g), B = random_arr(b, n, g, 0.3f);
        HostArr ref = A;
        strata::cpu::add_inplace({ref.data(), dtype(a)}, {B.data(), dtype(b)},
                                 static_cast<std::size_t>(n));
        const std::string what =
            fmt("add_inplace %s+=%s n=%lld", name(a), name(b), static_cast<long long>(n));
        const auto out = run_orders(what, [&] {
          DevBuf da(A), db(B);
          launch_add(da.get(), a, db.get(), b, da.get(), a, n, nullptr);
          expect_ok(what);
          return da.raw();
        });
        expect_bits(what, arr_from(out, 0, a, n), ref);
        // out aliasing the second operand.
        HostArr ref2(b, n);
        strata::cpu::add({A.data(), dtype(a)}, {B.data(), dtype(b)}, {ref2.data(), dtype(b)},
                         static_cast<std::size_t>(n));
        DevBuf da(A), db(B);
        launch_add(da.get(), a, db.get(), b, db.get(), b, n, nullptr);
        expect_ok(what + " (out == b)");
        expect_bits(what + " (out == b)", db.download(b, n), ref2);
      }
}

EMU_TEST("elementwise", scale) {
  std::mt19937 g(5);
  for (std::int64_t n : kSizes)
    for (DT d : kFloatDTs)
      for (float s : {0.5f, -3.0f, 1e-3f, 0.0f, 65536.0f}) {
        const HostArr A = special_values(n, g);
        const HostArr Ad = convert_arr(A, d);
        HostArr ref = Ad;
        strata::cpu::scale_inplace({ref.data(), dtype(d)}, s, static_cast<std::size_t>(n));
        const std::string what = fmt("scale %s by %g n=%lld", name(d), s, static_cast<long long>(n));
        const auto out = run_orders(what, [&] {
          DevBuf da(Ad);
          launch_scale(da.get(), d, s, n, nullptr);
          expect_ok(what);
          return da.raw();
        });
        expect_bits(what, arr_from(out, 0, d, n), ref);
      }
  for (auto f : {0, 1, 2}) {
    // n <= 0 queues nothing (no launch of an empty grid).
    if (f == 0) launch_scale(nullptr, DT::f32, 2.0f, 0, nullptr);
    if (f == 1) launch_add(nullptr, DT::f32, nullptr, DT::f32, nullptr, DT::f32, 0, nullptr);
    if (f == 2) launch_accumulate(nullptr, DT::f32, nullptr, 0, nullptr);
    expect_ok("n=0");
  }
}

EMU_TEST("elementwise", misaligned_views) {
  // map8.cuh moves 8 elements a thread with 16-byte accesses when every operand is 16-byte
  // aligned (the tests above), and one element a thread otherwise: views that start one element
  // into their buffer take that path and must give the same bits. Also each operand alone
  // misaligned, and sizes around the 8-element chunks (tails of 1..7).
  std::mt19937 g(6);
  for (std::int64_t n : {std::int64_t{7}, std::int64_t{8}, std::int64_t{9}, std::int64_t{263}})
    for (DT a : kFloatDTs)
      for (DT o : kFloatDTs)
        for (int shifted = 0; shifted < 3; ++shifted) {  // a, b, out one element in
          const DT b = DT::bf16;
          const HostArr A = random_arr(a, n, g), B = random_arr(b, n, g, 0.3f);
          HostArr ref(o, n);
          strata::cpu::add({A.data(), dtype(a)}, {B.data(), dtype(b)}, {ref.data(), dtype(o)},
                           static_cast<std::size_t>(n));
          const std::size_t sa = shifted == 0 ? size_of(a) : 0, sb = shifted == 1 ? size_of(b) : 0,
                            so = shifted == 2 ? size_of(o) : 0;
          const std::string what = fmt("add %s+%s->%s n=%lld, operand %d one element in", name(a),
                                       name(b), name(o), static_cast<long long>(n), shifted);
          const auto out = run_orders(what, [&] {
            DevBuf da(A.bytes.size() + 16), db(B.bytes.size() + 16), dout(static_cast<std::size_t>(n) * size_of(o) + 16);
            da.upload(A, sa);
            db.upload(B, sb);
            launch_add(static_cast<char*>(da.get()) + sa, a, static_cast<char*>(db.get()) + sb, b,
                       static_cast<char*>(dout.get()) + so, o, n, nullptr);
            expect_ok(what);
            return dout.raw();
          });
          expect_bits(what, arr_from(out, so, o, n), ref);
          // convert and scale through the same path.
          if (shifted != 0) continue;
          HostArr cref(o, n);
          strata::convert(A.data(), dtype(a), cref.data(), dtype(o), static_cast<std::size_t>(n));
          DevBuf ds(A.bytes.size() + 16), dd(static_cast<std::size_t>(n) * size_of(o) + 16);
          ds.upload(A, sa);
          launch_convert(static_cast<char*>(ds.get()) + sa, a, dd.get(), o, n, nullptr);
          expect_ok(what + " (convert)");
          expect_bits(what + " (convert)", dd.download(o, n), cref, /*nan_any=*/false);
          HostArr sref = A;
          strata::cpu::scale_inplace({sref.data(), dtype(a)}, -0.75f, static_cast<std::size_t>(n));
          launch_scale(static_cast<char*>(ds.get()) + sa, a, -0.75f, n, nullptr);
          expect_ok(what + " (scale)");
          expect_bits(what + " (scale)", ds.download(a, n, sa), sref);
        }
}

EMU_TEST("elementwise", fill) {
  // count copies of a 1-, 2-, 4- or 8-byte pattern, and nothing past them.
  for (std::size_t bytes : {1, 2, 4, 8})
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{257},
                              std::size_t{5000}}) {
      const unsigned char pattern[8] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0};
      const std::string what = fmt("fill %zu-byte x %zu", bytes, count);
      const std::size_t total = bytes * count + 64;
      const auto out = run_orders(what, [&] {
        DevBuf d(total);
        std::vector<unsigned char> init(total, 0xee);
        d.upload(init.data(), total);
        const cudaError_t e =
            strata::cuda::fill_async_impl(d.get(), pattern, bytes, count, nullptr);
        expect_ok(what, e);
        return d.raw();
      });
      checked();
      for (std::size_t i = 0; i < total; ++i) {
        const unsigned char want = i < bytes * count ? pattern[i % bytes] : 0xee;
        if (out[i] != want) {
          fail("%s: byte %zu is %#x, expected %#x", what.c_str(), i, out[i], want);
          break;
        }
      }
    }
  unsigned char p[3] = {1, 2, 3};
  DevBuf d(30);
  checked();
  if (strata::cuda::fill_async_impl(d.get(), p, 3, 10, nullptr) != cudaErrorInvalidValue)
    fail("fill with a 3-byte pattern: not cudaErrorInvalidValue");
}

}  // namespace
}  // namespace cuda_emu_test
