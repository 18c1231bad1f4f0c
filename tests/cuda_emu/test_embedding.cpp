// embedding.cu against the CPU's f32 embedding (backend/cpu) on the widened operands, as the CPU
// table runs it: bitwise (the same f32 additions in the same order; 16-bit gradients as Acc32,
// round(old + f32 sum)). Whole tables and vocabulary slices (tokens of other slices add nothing),
// repeated tokens, widths above a block, the token check, and the dwte scratch protocol (the
// CUB stand-in checks its temporary storage).
#include <climits>
#include <cstring>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/cuda/ops/embedding.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using namespace strata::cuda_ops;

struct Case {
  int B, T, C;
  std::int64_t V;            // the whole vocabulary
  std::int64_t slice_start;  // -1: a whole table; else the table holds [start, start + rows)
  std::int64_t slice_rows;
};
constexpr Case kCases[] = {
    {1, 1, 1, 1, -1, 0},       {2, 5, 7, 11, -1, 0},      {3, 4, 300, 50, -1, 0},
    {2, 64, 33, 1000, -1, 0},  {2, 9, 5, 40, 10, 12},     {4, 16, 257, 300, 256, 44},
    {1, 50, 3, 2, 0, 1},       {5, 40, 2, 600, 0, 256},   {2, 30, 513, 5, 3, 2},
};

std::vector<std::int32_t> tokens_for(const Case& c, std::mt19937& g) {
  // Few distinct tokens next to each other, so that rows repeat (runs in the sorted keys).
  std::uniform_int_distribution<std::int64_t> d(0, c.V - 1);
  std::vector<std::int32_t> t(static_cast<std::size_t>(c.B) * c.T);
  for (auto& v : t) v = static_cast<std::int32_t>(d(g));
  for (std::size_t i = 1; i < t.size(); i += 3) t[i] = t[i - 1];
  return t;
}

std::int64_t rows_of(const Case& c) { return c.slice_start < 0 ? c.V : c.slice_rows; }
std::int64_t start_of(const Case& c) { return c.slice_start < 0 ? 0 : c.slice_start; }

std::string label(const char* op, const Case& c) {
  return fmt("%s B=%d T=%d C=%d V=%lld %s", op, c.B, c.T, c.C, static_cast<long long>(c.V),
             c.slice_start < 0 ? "whole"
                               : fmt("slice [%lld, +%lld)", static_cast<long long>(c.slice_start),
                                     static_cast<long long>(c.slice_rows))
                                     .c_str());
}

DevBuf tokens_dev(const std::vector<std::int32_t>& t) {
  DevBuf d(t.size() * 4);
  d.upload(t.data(), t.size() * 4);
  return d;
}

EMU_TEST("embedding", forward) {
  std::mt19937 g(31);
  for (const Case& c : kCases)
    for (DT wd : kFloatDTs)
      for (DT pd : kFloatDTs)
        for (DT od : kFloatDTs)
          for (bool has_wpe : {true, false}) {
            if (!has_wpe && pd != DT::f32) continue;
            if (c.C > 256 && (wd != pd || pd != od)) continue;  // wide rows: the uniform mixes
            const std::int64_t N = static_cast<std::int64_t>(c.B) * c.T, rows = rows_of(c);
            const std::vector<std::int32_t> tok = tokens_for(c, g);
            const HostArr wte = random_arr(wd, rows * c.C, g), wpe = random_arr(pd, std::int64_t{c.T} * c.C, g);
            std::vector<float> e32 = wte.f32(), p32 = wpe.f32(), o32(static_cast<std::size_t>(N * c.C));
            strata::cpu::embedding_forward(tok.data(), e32.data(), has_wpe ? p32.data() : nullptr,
                                           o32.data(), c.B, c.T, c.C, start_of(c), rows);
            HostArr ref(od, N * c.C);
            for (std::int64_t i = 0; i < ref.n; ++i) ref.set(i, o32[static_cast<std::size_t>(i)]);
            const std::string what = label("embedding_forward", c) +
                                     fmt(" wte %s wpe %s out %s", name(wd), has_wpe ? name(pd) : "-", name(od));
            const auto out = run_orders(what, [&] {
              DevBuf dt = tokens_dev(tok), de(wte), dp(wpe), dout(static_cast<std::size_t>(N * c.C) * size_of(od));
              launch_embedding_forward(dt.as<std::int32_t>(), de.get(), wd, start_of(c), rows,
                                       has_wpe ? dp.get() : nullptr, pd, dout.get(), od, N, c.T,
                                       c.C, nullptr);
              expect_ok(what);
              return dout.raw();
            });
            expect_bits(what, arr_from(out, 0, od, N * c.C), ref);
          }
}

EMU_TEST("embedding", find_bad_token) {
  std::mt19937 g(32);
  const std::int64_t hi_slice = static_cast<std::int64_t>(INT_MAX) + 1;
  struct T {
    std::int64_t n, hi;
    std::vector<std::pair<std::int64_t, std::int32_t>> bad;  // (position, value)
  };
  const T cases[] = {
      {0, 10, {}},
      {1, 10, {}},
      {1, 10, {{0, 10}}},
      {300, 50, {}},
      {300, 50, {{299, 50}}},
      {1000, 50, {{700, -1}, {900, 51}, {256, 1000000}}},
      {1000, 50, {{3, -7}, {2, 50}}},
      {600, hi_slice, {{500, INT_MAX}, {400, -2}}},
      {600, hi_slice, {}},
  };
  for (const T& c : cases) {
    std::vector<std::int32_t> tok(static_cast<std::size_t>(c.n));
    std::uniform_int_distribution<std::int32_t> d(0, static_cast<std::int32_t>(std::min<std::int64_t>(c.hi, 50) - 1));
    for (auto& v : tok) v = d(g);
    std::int64_t want_i = -1;
    std::int32_t want_v = 0;
    for (auto [i, v] : c.bad) tok[static_cast<std::size_t>(i)] = v;
    for (std::int64_t i = 0; i < c.n; ++i)
      if (tok[static_cast<std::size_t>(i)] < 0 || tok[static_cast<std::size_t>(i)] >= c.hi) {
        want_i = i;
        want_v = tok[static_cast<std::size_t>(i)];
        break;
      }
    const std::string what = fmt("find_bad_token n=%lld hi=%lld", static_cast<long long>(c.n),
                                 static_cast<long long>(c.hi));
    const auto out = run_orders(what, [&] {
      DevBuf dt = tokens_dev(tok), flag(8);
      std::int64_t index = 99;
      std::int32_t value = 99;
      const cudaError_t e = find_bad_token(dt.as<std::int32_t>(), c.n, c.hi,
                                           flag.as<unsigned long long>(), &index, &value, nullptr);
      expect_ok(what, e);
      std::vector<unsigned char> o;
      append(o, &index, sizeof index);
      append(o, &value, sizeof value);
      return o;
    });
    std::int64_t index;
    std::int32_t value;
    std::memcpy(&index, out.data(), 8);
    std::memcpy(&value, out.data() + 8, 4);
    checked();
    if (index != want_i || (want_i >= 0 && value != want_v))
      fail("%s: got (%lld, %d), want (%lld, %d)", what.c_str(), static_cast<long long>(index), value,
           static_cast<long long>(want_i), want_v);
  }
}

EMU_TEST("embedding", backward_dwpe) {
  std::mt19937 g(33);
  for (const Case& c : kCases)
    for (DT dd : kFloatDTs)
      for (DT pd : kFloatDTs) {
        const std::int64_t N = static_cast<std::int64_t>(c.B) * c.T, TC = std::int64_t{c.T} * c.C;
        const HostArr dout = random_arr(dd, N * c.C, g), old = random_arr(pd, TC, g);
        std::vector<float> d32 = dout.f32();
        HostArr ref = old;
        if (pd == DT::f32) {
          std::vector<float> acc = old.f32();
          std::vector<std::int32_t> tok(static_cast<std::size_t>(N), 0);
          strata::cpu::embedding_backward(tok.data(), d32.data(), nullptr, acc.data(), c.B, c.T,
                                          c.C);
          std::memcpy(ref.data(), acc.data(), acc.size() * 4);
        } else {  // Acc32: the rows summed into zeros, then added into the 16-bit values once
          std::vector<float> acc(static_cast<std::size_t>(TC), 0.0f);
          std::vector<std::int32_t> tok(static_cast<std::size_t>(N), 0);
          strata::cpu::embedding_backward(tok.data(), d32.data(), nullptr, acc.data(), c.B, c.T,
                                          c.C);
          strata::cpu::add_inplace({ref.data(), dtype(pd)}, {acc.data(), DType::f32},
                                   static_cast<std::size_t>(TC));
        }
        const std::string what = label("embedding_backward dwpe", c) +
                                 fmt(" dout %s dwpe %s", name(dd), name(pd));
        const auto out = run_orders(what, [&] {
          DevBuf bd(dout), bp(old);
          launch_embedding_backward_dwpe(bd.get(), dd, bp.get(), pd, c.B, c.T, c.C, nullptr);
          expect_ok(what);
          return bp.raw();
        });
        expect_bits(what, arr_from(out, 0, pd, TC), ref);
      }
}

EMU_TEST("embedding", backward_dwte) {
  std::mt19937 g(34);
  for (const Case& c : kCases)
    for (DT dd : kFloatDTs)
      for (DT ed : kFloatDTs) {
        if (c.C > 256 && dd != ed) continue;
        const std::int64_t N = static_cast<std::int64_t>(c.B) * c.T, rows = rows_of(c);
        const std::vector<std::int32_t> tok = tokens_for(c, g);
        const HostArr dout = random_arr(dd, N * c.C, g), old = random_arr(ed, rows * c.C, g);
        std::vector<float> d32 = dout.f32();
        HostArr ref = old;
        if (ed == DT::f32) {
          std::vector<float> acc = old.f32();
          strata::cpu::embedding_backward(tok.data(), d32.data(), acc.data(), nullptr, c.B, c.T,
                                          c.C, start_of(c), rows);
          std::memcpy(ref.data(), acc.data(), acc.size() * 4);
        } else {
          std::vector<float> acc(static_cast<std::size_t>(rows * c.C), 0.0f);
          strata::cpu::embedding_backward(tok.data(), d32.data(), acc.data(), nullptr, c.B, c.T,
                                          c.C, start_of(c), rows);
          strata::cpu::add_inplace({ref.data(), dtype(ed)}, {acc.data(), DType::f32},
                                   static_cast<std::size_t>(rows * c.C));
        }
        const std::string what = label("embedding_backward dwte", c) +
                                 fmt(" dout %s dwte %s", name(dd), name(ed));
        std::size_t bytes = 0;
        expect_ok(what + " scratch bytes", embedding_dwte_scratch_bytes(N, rows, &bytes, nullptr));
        const auto out = run_orders(what, [&] {
          DevBuf dt = tokens_dev(tok), bd(dout), be(old), scratch(bytes);  // exactly the bytes asked
          const cudaError_t e = launch_embedding_backward_dwte(
              dt.as<std::int32_t>(), N, start_of(c), rows, bd.get(), dd, be.get(), ed, c.C,
              scratch.get(), bytes, nullptr);
          expect_ok(what, e);
          return be.raw();
        });
        expect_bits(what, arr_from(out, 0, ed, rows * c.C), ref);
      }
}

EMU_TEST("embedding", dwte_scratch_protocol) {
  std::size_t bytes = 7;
  expect_ok("scratch n=0", embedding_dwte_scratch_bytes(0, 10, &bytes, nullptr));
  checked();
  if (bytes != 0) fail("scratch bytes for n=0: %zu", bytes);
  expect_ok("scratch rows=0", embedding_dwte_scratch_bytes(10, 0, &bytes, nullptr));
  checked();
  if (bytes != 0) fail("scratch bytes for 0 rows: %zu", bytes);
  // Too little scratch: refused before anything runs.
  std::vector<std::int32_t> tok = {1, 2, 3};
  DevBuf dt = tokens_dev(tok), dout(3 * 4 * 4), dwte(5 * 4 * 4);
  expect_ok("scratch", embedding_dwte_scratch_bytes(3, 5, &bytes, nullptr));
  DevBuf small(bytes - 1);
  const cudaError_t e = launch_embedding_backward_dwte(dt.as<std::int32_t>(), 3, 0, 5, dout.get(),
                                                       DT::f32, dwte.get(), DT::f32, 4,
                                                       small.get(), bytes - 1, nullptr);
  checked();
  if (e != cudaErrorInvalidValue) fail("too small a scratch: %s", cudaGetErrorName(e));
  expect_ok("no launch after a refused scratch");
}

}  // namespace
}  // namespace cuda_emu_test
