// The op layer over the kernels (backend/cuda/ops/*_op.cpp and common.cpp, compiled here under
// the stand-in runtime): workspaces, the f32 views, the values read back to the host
// (read_back's pinned buffer), the errors raised from device-side checks. The ops run on host
// tensors (the framework's CPU allocator: the emulator's device-pointer checks are off here;
// test_* of each kernel file has them on) and are compared with the CPU kernels, bitwise where
// the launchers are.
#include <cmath>
#include <cstring>
#include <limits>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda/ops/reduce.hpp"
#include "framework/backend/cuda/ops/layernorm.hpp"
#include "framework/backend/cuda/ops/optimizer.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/adamw8bit.hpp"
#include "framework/optim/lion.hpp"
#include "framework/optim/sgd.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using strata::Shape;
using strata::Tensor;
namespace ops = strata::cuda_ops;

// Pointer checks off for the scope (host tensors).
struct HostTensors {
  HostTensors() { emu::set_pointer_checks(false); }
  ~HostTensors() { emu::set_pointer_checks(true); }
};

Tensor tensor_of(const HostArr& a, const Shape& shape) {
  Tensor t = Tensor::empty(shape, dtype(a.dt));
  std::memcpy(t.raw(), a.data(), a.bytes.size());
  return t;
}
HostArr arr_of(const Tensor& t, DT d) {
  HostArr a(d, t.numel());
  std::memcpy(a.data(), t.raw(), a.bytes.size());
  return a;
}
Tensor i32_tensor(const std::vector<std::int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::i32);
  std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

// Runs f, which must throw a strata error whose message contains `text`.
template <typename F>
void expect_throw(const std::string& what, F&& f, const std::string& text) {
  checked();
  try {
    f();
  } catch (const std::exception& e) {
    if (std::string(e.what()).find(text) == std::string::npos)
      fail("%s: threw \"%s\", expected it to say \"%s\"", what.c_str(), e.what(), text.c_str());
    return;
  }
  fail("%s: did not throw", what.c_str());
}

EMU_TEST("ops", elementwise_and_cast) {
  HostTensors host;
  std::mt19937 g(81);
  const HostArr a = random_arr(DT::bf16, 300, g), b = random_arr(DT::f32, 300, g);
  Tensor ta = tensor_of(a, Shape{300}), tb = tensor_of(b, Shape{300}), to = Tensor::empty(Shape{300}, DType::f16);
  ops::add(ta, tb, to);
  HostArr ref(DT::f16, 300);
  strata::cpu::add({a.data(), DType::bf16}, {b.data(), DType::f32}, {ref.data(), DType::f16}, 300);
  expect_bits("add", arr_of(to, DT::f16), ref);
  ops::add_inplace(ta, tb);
  HostArr ref2 = a;
  strata::cpu::add_inplace({ref2.data(), DType::bf16}, {b.data(), DType::f32}, 300);
  expect_bits("add_inplace", arr_of(ta, DT::bf16), ref2);
  ops::scale_inplace(ta, 0.5f);
  strata::cpu::scale_inplace({ref2.data(), DType::bf16}, 0.5f, 300);
  expect_bits("scale_inplace", arr_of(ta, DT::bf16), ref2);
  Tensor tc = Tensor::empty(Shape{300}, DType::f32);
  ops::cast(ta, tc);
  expect_bits("cast", arr_of(tc, DT::f32), convert_arr(ref2, DT::f32));
  expect_ok("elementwise ops");
}

EMU_TEST("ops", reductions_read_back) {
  HostTensors host;
  std::mt19937 g(82);
  for (DT d : kFloatDTs) {
    const HostArr x = random_arr(d, 5000, g);
    Tensor t = tensor_of(x, Shape{50, 100});
    const double got = ops::sum_squares(t);
    long double exact = 0;
    for (std::int64_t i = 0; i < x.n; ++i) exact += static_cast<long double>(x.get(i)) * x.get(i);
    expect_close(fmt("sum_squares %s", name(d)), got, static_cast<double>(exact), 1e-14);
    checked();
    if (ops::has_inf_or_nan(t)) fail("has_inf_or_nan %s: finite values reported", name(d));
    HostArr y = x;
    y.set(4321, std::numeric_limits<float>::infinity());
    checked();
    if (!ops::has_inf_or_nan(tensor_of(y, Shape{5000}))) fail("has_inf_or_nan %s: inf missed", name(d));
  }
  checked();
  if (ops::sum_squares(Tensor::empty(Shape{0}, DType::f32)) != 0.0) fail("sum_squares of nothing");
  expect_ok("reductions");
}

EMU_TEST("ops", read_back_paths) {
  // Up to 64 bytes through the thread's pinned buffer, more straight into the destination; the
  // source is device memory (pointer checks on).
  for (std::size_t bytes : {std::size_t{8}, std::size_t{64}, std::size_t{65}, std::size_t{1000}}) {
    std::vector<unsigned char> src(bytes), dst(bytes, 0);
    for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
    DevBuf d(bytes);
    d.upload(src.data(), bytes);
    ops::read_back(dst.data(), d.get(), bytes, nullptr, "read_back test");
    expect_ok(fmt("read_back %zu bytes", bytes));
    checked();
    if (dst != src) fail("read_back of %zu bytes: other bytes", bytes);
  }
}

EMU_TEST("ops", f32_views) {
  // In32 widens a 16-bit tensor, Out32 rounds once on commit, Acc32 adds a zeroed (or, with
  // overwrite, unzeroed) f32 accumulator into the tensor on commit; f32 tensors are used as they
  // are.
  HostTensors host;
  std::mt19937 g(88);
  const HostArr a = random_arr(DT::bf16, 100, g), acc0 = random_arr(DT::f16, 100, g);
  Tensor ta = tensor_of(a, Shape{100});
  ops::In32 in(ta);
  HostArr w(DT::f32, 100);
  std::memcpy(w.data(), in.get(), 400);
  expect_bits("In32 of bf16", w, convert_arr(a, DT::f32));
  Tensor tf = Tensor::empty(Shape{100}, DType::f32);
  checked();
  if (ops::In32(tf).get() != tf.raw() || ops::Out32(tf).get() != tf.raw() || ops::Acc32(tf).get() != tf.raw())
    fail("an f32 tensor's view is not the tensor itself");
  Tensor to = Tensor::empty(Shape{100}, DType::f16);
  {
    ops::Out32 out(to);
    for (int i = 0; i < 100; ++i) out.get()[i] = w.get(i) * 3.0f;
    out.commit();
  }
  HostArr ref(DT::f16, 100);
  for (int i = 0; i < 100; ++i) ref.set(i, w.get(i) * 3.0f);
  expect_bits("Out32 commit", arr_of(to, DT::f16), ref);
  for (bool overwrite : {false, true}) {
    Tensor tc = tensor_of(acc0, Shape{100});
    ops::Acc32 acc(tc, overwrite);
    for (int i = 0; i < 100; ++i) {
      if (overwrite) acc.get()[i] = 0.0f;
      acc.get()[i] += w.get(i);
    }
    acc.commit();
    HostArr r = acc0;
    std::vector<float> add = w.f32();
    strata::cpu::add_inplace({r.data(), DType::f16}, {add.data(), DType::f32}, 100);
    expect_bits(fmt("Acc32 commit (overwrite %d)", overwrite), arr_of(tc, DT::f16), r);
  }
  expect_ok("f32 views");
}

EMU_TEST("ops", layernorm_backward_workspace) {
  HostTensors host;
  std::mt19937 g(83);
  const int N = 300, C = 40;
  const HostArr x = random_arr(DT::bf16, N * C, g), dy = random_arr(DT::f32, N * C, g),
                w = random_arr(DT::f32, C, g), dw = random_arr(DT::bf16, C, g), db = random_arr(DT::f16, C, g);
  std::vector<float> x32 = x.f32(), y32(N * C), mean(N), rstd(N);
  strata::cpu::layernorm_forward(x32.data(), nullptr, nullptr, y32.data(), mean.data(), rstd.data(), N, C, 1e-5f);
  Tensor tm = Tensor::empty(Shape{N}, DType::f32), tr = Tensor::empty(Shape{N}, DType::f32);
  std::memcpy(tm.raw(), mean.data(), N * 4);
  std::memcpy(tr.raw(), rstd.data(), N * 4);
  Tensor tx = tensor_of(x, Shape{N, C}), tdy = tensor_of(dy, Shape{N, C}), tw = tensor_of(w, Shape{C});
  Tensor tdw = tensor_of(dw, Shape{C}), tdb = tensor_of(db, Shape{C}), tdx = Tensor::empty(Shape{N, C}, DType::f32);
  ops::layernorm_backward(tdy, tx, tw, tm, tr, tdx, tdw, tdb);
  expect_ok("layernorm_backward op");
  // The same through the launcher (checked against the CPU in test_layernorm.cpp): bitwise.
  emu::set_pointer_checks(true);
  DevBuf bx(x), bdy(dy), bw(w), bdw(dw), bdb(db), bm(N * 4), br(N * 4), bdx(N * C * 4),
      part(static_cast<std::size_t>(ops::layernorm_backward_partial_floats(N, C)) * 4);
  bm.upload(mean.data(), N * 4);
  br.upload(rstd.data(), N * 4);
  ops::launch_layernorm_backward(bdy.get(), DT::f32, bx.get(), DT::bf16, bw.get(), DT::f32,
                                 bm.as<float>(), br.as<float>(), bdx.get(), DT::f32, bdw.get(),
                                 DT::bf16, bdb.get(), DT::f16, N, C, part.as<float>(), nullptr);
  expect_ok("layernorm_backward launcher");
  emu::set_pointer_checks(false);
  expect_bits("layernorm_backward op dx", arr_of(tdx, DT::f32), bdx.download(DT::f32, N * C));
  expect_bits("layernorm_backward op dw", arr_of(tdw, DT::bf16), bdw.download(DT::bf16, C));
  expect_bits("layernorm_backward op db", arr_of(tdb, DT::f16), bdb.download(DT::f16, C));
  // No dw, no db: no workspace.
  ops::layernorm_backward(tdy, tx, tw, tm, tr, tdx, Tensor(), Tensor());
  expect_ok("layernorm_backward op without dw/db");
}

EMU_TEST("ops", embedding_checks_and_workspaces) {
  HostTensors host;
  std::mt19937 g(84);
  const int B = 3, T = 20, C = 9, V = 50;
  std::vector<std::int32_t> tok(B * T);
  std::uniform_int_distribution<int> d(0, V - 1);
  for (auto& t : tok) t = d(g);
  const HostArr wte = random_arr(DT::bf16, V * C, g), wpe = random_arr(DT::f32, T * C, g);
  Tensor tt = i32_tensor(tok, Shape{B, T}), te = tensor_of(wte, Shape{V, C}), tp = tensor_of(wpe, Shape{T, C});
  Tensor out = Tensor::empty(Shape{B * T, C}, DType::f32);
  ops::embedding_forward(tt, te, tp, out, -1);
  std::vector<float> e32 = wte.f32(), p32 = wpe.f32(), o32(B * T * C);
  strata::cpu::embedding_forward(tok.data(), e32.data(), p32.data(), o32.data(), B, T, C);
  HostArr ref(DT::f32, B * T * C);
  std::memcpy(ref.data(), o32.data(), o32.size() * 4);
  expect_bits("embedding_forward op", arr_of(out, DT::f32), ref);
  // dwte (16-bit) and dwpe through the op: the sort's scratch is a workspace.
  const HostArr dout = random_arr(DT::f32, B * T * C, g), dwte0 = random_arr(DT::f16, V * C, g);
  Tensor tdo = tensor_of(dout, Shape{B * T, C}), tdwte = tensor_of(dwte0, Shape{V, C});
  Tensor tdwpe = Tensor::zeros(Shape{T, C}, DType::f32);
  ops::embedding_backward(tt, tdo, tdwte, tdwpe, -1);
  std::vector<float> acc(V * C, 0.0f), accp(T * C, 0.0f), d32 = dout.f32();
  strata::cpu::embedding_backward(tok.data(), d32.data(), acc.data(), accp.data(), B, T, C);
  HostArr ref_e = dwte0, ref_p(DT::f32, T * C);
  strata::cpu::add_inplace({ref_e.data(), DType::f16}, {acc.data(), DType::f32}, V * C);
  std::memcpy(ref_p.data(), accp.data(), accp.size() * 4);
  expect_bits("embedding_backward op dwte", arr_of(tdwte, DT::f16), ref_e);
  expect_bits("embedding_backward op dwpe", arr_of(tdwpe, DT::f32), ref_p);
  expect_ok("embedding ops");
  // A token outside the table: the CPU's message, with the first bad position and its value.
  tok[37] = V + 7;
  tok[45] = -3;
  Tensor bad = i32_tensor(tok, Shape{B, T});
  expect_throw("embedding_forward bad token", [&] { ops::embedding_forward(bad, te, tp, out, -1); },
               "embedding_forward: token 57 at position 37 is outside the vocabulary [0, 50)");
  expect_throw("embedding_backward bad token",
               [&] { ops::embedding_backward(bad, tdo, tdwte, tdwpe, -1); },
               "embedding_backward: token 57 at position 37 is outside the vocabulary [0, 50)");
  // On a vocabulary slice only negative tokens are bad.
  expect_throw("embedding_forward slice, negative token",
               [&] { ops::embedding_forward(bad, te, tp, out, 10); },
               "token -3 at position 45 is outside the vocabulary [0, 50)");
  expect_ok("embedding errors");
  // The caller has checked the tokens (the GPT does, on the host, before the batch goes up): the
  // op does not check them (no wait for a result), and a token outside the table still reads and
  // writes nothing out of bounds (AddressSanitizer): its row is its position's alone, no gradient.
  const std::vector<float> wpe32 = wpe.f32();
  const HostArr dwte_before = arr_of(tdwte, DT::f16);
  ops::embedding_forward(bad, te, tp, out, -1, strata::ops::TokenCheck::done_by_caller);
  ops::embedding_backward(bad, tdo, tdwte, Tensor(), -1, strata::ops::TokenCheck::done_by_caller);
  expect_ok("embedding ops, tokens checked by the caller");
  const HostArr got = arr_of(out, DT::f32);
  for (const int pos : {37, 45})
    for (int c = 0; c < C; ++c)
      expect_close(fmt("embedding_forward, caller-checked bad token at %d", pos),
                   got.get(std::int64_t{pos} * C + c),
                   wpe32[static_cast<std::size_t>((pos % T) * C + c)], 0.0, 0.0);
  // The bad tokens' gradients went nowhere: dwte moved only in the good tokens' rows.
  const HostArr dwte_after = arr_of(tdwte, DT::f16);
  std::vector<bool> used(V, false);
  for (std::size_t i = 0; i < tok.size(); ++i)
    if (tok[i] >= 0 && tok[i] < V) used[static_cast<std::size_t>(tok[i])] = true;
  for (int r = 0; r < V; ++r)
    if (!used[static_cast<std::size_t>(r)])
      for (int c = 0; c < C; ++c)
        expect_close(fmt("embedding_backward, caller-checked: untouched row %d", r),
                     dwte_after.get(std::int64_t{r} * C + c),
                     dwte_before.get(std::int64_t{r} * C + c), 0.0, 0.0);
}

EMU_TEST("ops", cross_entropy_read_back_and_errors) {
  HostTensors host;
  std::mt19937 g(85);
  const int N = 40, V = 300;
  const HostArr x = random_arr(DT::bf16, N * V, g, 2.0f);
  std::vector<std::int32_t> tg(N);
  std::uniform_int_distribution<int> d(0, V - 1);
  for (int r = 0; r < N; ++r) tg[r] = r % 6 == 5 ? -1 : d(g);
  Tensor tx = tensor_of(x, Shape{N, V}), tt = i32_tensor(tg, Shape{N}), tl = Tensor::empty(Shape{N}, DType::f32);
  Tensor sum = Tensor::empty(Shape{1}, DType::f64);
  ops::cross_entropy_forward(tx, tt, tl, sum);
  std::vector<float> lse(N);
  const double ref = strata::cpu::cross_entropy_forward({x.data(), DType::bf16}, tg.data(), lse.data(), N, V);
  expect_close("cross_entropy_forward op", sum.item(), ref, 1e-6);
  checked();
  sum.fill(7.0);
  ops::cross_entropy_forward(Tensor::empty(Shape{0, V}, DType::f32), Tensor::empty(Shape{0}, DType::i32),
                             Tensor::empty(Shape{0}, DType::f32), sum);
  if (sum.item() != 0.0) fail("cross_entropy_forward of no rows: sum %g, not 0", sum.item());
  // A target >= V: the sum is NaN (ops::cross_entropy_forward's host form raises the CPU's error
  // from it; the GPU's op harness checks that, test_arg_checks.cpp).
  tg[29] = V + 3;
  Tensor bad = i32_tensor(tg, Shape{N});
  ops::cross_entropy_forward(tx, bad, tl, sum);
  if (!std::isnan(sum.item())) fail("cross_entropy_forward bad target: sum %g, not NaN", sum.item());
  // The backward in place (dlogits == logits).
  ops::cross_entropy_backward(tx, tl, tt, tx, 0.5f);
  expect_ok("cross_entropy ops");
}

EMU_TEST("ops", optimizer_steps) {
  HostTensors host;
  std::mt19937 g(86);
  const int n = 1000;
  std::vector<float> p = random_arr(DT::f32, n, g).f32(), m(n, 0.0f), v(n, 0.0f);
  const HostArr gr = random_arr(DT::f16, n, g);
  Tensor tp = Tensor::empty(Shape{n}, DType::f32), tm = Tensor::zeros(Shape{n}, DType::f32),
         tv = Tensor::zeros(Shape{n}, DType::f32), tg = tensor_of(gr, Shape{n}),
         t16 = Tensor::empty(Shape{n}, DType::bf16);
  std::memcpy(tp.raw(), p.data(), n * 4);
  const strata::optim::AdamWHyper h;
  ops::adamw_step(tp, tg, tm, tv, h, 1, 0.5f, t16);
  std::vector<float> g32 = gr.f32();
  strata::optim::adamw_step_reference(p.data(), g32.data(), m.data(), v.data(), n, h, 1, 0.5f);
  HostArr rp(DT::f32, n), r16(DT::bf16, n);
  std::memcpy(rp.data(), p.data(), n * 4);
  for (int i = 0; i < n; ++i) r16.set(i, p[i]);
  expect_bits("adamw_step op master", arr_of(tp, DT::f32), rp);
  expect_bits("adamw_step op param16", arr_of(t16, DT::bf16), r16);
  // SGD without momentum: the (undefined) buffer is never touched.
  strata::optim::SGDHyper sh;
  sh.lr = 0.1;
  ops::sgd_step(tp, tg, Tensor(), sh, 1, 1.0f, Tensor());
  strata::optim::sgd_step_reference(p.data(), g32.data(), nullptr, n, sh, 1, 1.0f);
  std::memcpy(rp.data(), p.data(), n * 4);
  expect_bits("sgd_step op master", arr_of(tp, DT::f32), rp);
  expect_throw("adamw_step bad step", [&] { ops::adamw_step(tp, tg, tm, tv, h, 0, 1.0f, Tensor()); }, "step");
  expect_ok("optimizer ops");
}

// The 8-bit ops: the codes uploaded once and reused by later steps; a unit's decay runs by value
// (a few runs) and in a workspace (more than kQ8InlineRuns); bitwise the CPU's step each time.
EMU_TEST("ops", optimizer_8bit_steps) {
  namespace optim = strata::optim;
  HostTensors host;
  const auto as_arr = [](const std::vector<float>& v) {
    HostArr a(DT::f32, static_cast<std::int64_t>(v.size()));
    std::memcpy(a.data(), v.data(), v.size() * 4);
    return a;
  };
  const auto expect_bytes = [](const std::string& what, const Tensor& t,
                               const std::vector<std::uint8_t>& ref) {
    checked();
    if (std::memcmp(t.raw(), ref.data(), ref.size()) != 0) fail("%s: bytes differ", what.c_str());
  };
  std::mt19937 g(87);
  const int n = 2 * 2048 + 300;
  const auto un = static_cast<std::size_t>(n);
  const std::size_t nb = optim::quant_blocks(un);
  std::vector<float> p = random_arr(DT::f32, n, g).f32();
  std::vector<std::uint8_t> mq(un, 0), vq(un, 0), lq(un, 0);
  std::vector<float> ma(nb, 0.0f), va(nb, 0.0f), la(nb, 0.0f), lp = p;
  Tensor tp = Tensor::empty(Shape{n}, DType::f32), tl = Tensor::empty(Shape{n}, DType::f32),
         tmq = Tensor::zeros(Shape{n}, DType::u8), tvq = Tensor::zeros(Shape{n}, DType::u8),
         tlq = Tensor::zeros(Shape{n}, DType::u8),
         tma = Tensor::zeros(Shape{static_cast<std::int64_t>(nb)}, DType::f32),
         tva = Tensor::zeros(Shape{static_cast<std::int64_t>(nb)}, DType::f32),
         tla = Tensor::zeros(Shape{static_cast<std::int64_t>(nb)}, DType::f32);
  std::memcpy(tp.raw(), p.data(), un * 4);
  std::memcpy(tl.raw(), p.data(), un * 4);
  // Step 1: three runs (by value); steps 2 and 3: a run every 50 elements (87 > kQ8InlineRuns).
  const std::vector<optim::DecayRun> few = {{0, 100, false}, {100, 3000, true}, {3000, un, false}};
  std::vector<optim::DecayRun> many;
  for (std::size_t b = 0; b < un; b += 50) many.push_back({b, std::min(b + 50, un), (b / 50) % 2 == 0});
  if (many.size() <= static_cast<std::size_t>(ops::kQ8InlineRuns)) fail("the many runs fit by value");
  optim::AdamWHyper h;
  h.weight_decay = 0.1;
  const optim::LionHyper lh{1e-3, 0.9, 0.99, 0.1};
  for (std::int64_t step = 1; step <= 3; ++step) {
    const std::vector<optim::DecayRun>& runs = step == 1 ? few : many;
    const HostArr gr = random_arr(DT::f32, n, g);
    const Tensor tg = tensor_of(gr, Shape{n});
    ops::adamw8bit_step(tp, tg, tmq, tvq, tma, tva, runs, h, step, 0.5f, Tensor());
    ops::lion8bit_step(tl, tg, tlq, tla, runs, lh, step, 0.5f, Tensor());
    const optim::Quant8Moments q{mq.data(), vq.data(), ma.data(), va.data()};
    optim::adamw8bit_step(p.data(), gr.data(), q, un, runs, h, step, 0.5f);
    optim::lion8bit_step(lp.data(), gr.data(), lq.data(), la.data(), un, runs, lh, step, 0.5f);
    const std::string w = fmt(" step %lld", static_cast<long long>(step));
    expect_bits("adamw8bit_step op master" + w, arr_of(tp, DT::f32), as_arr(p));
    expect_bytes("adamw8bit_step op m codes" + w, tmq, mq);
    expect_bytes("adamw8bit_step op v codes" + w, tvq, vq);
    expect_bits("adamw8bit_step op v absmax" + w, arr_of(tva, DT::f32), as_arr(va));
    expect_bits("lion8bit_step op master" + w, arr_of(tl, DT::f32), as_arr(lp));
    expect_bytes("lion8bit_step op m codes" + w, tlq, lq);
  }
  expect_ok("8-bit optimizer ops");
}

EMU_TEST("ops", attention_workspace) {
  HostTensors host;
  std::mt19937 g(87);
  const int B = 2, T = 21, NH = 2, hs = 8, C = NH * hs;
  const HostArr qkv = random_arr(DT::f32, B * T * 3 * C, g), dout = random_arr(DT::f32, B * T * C, g);
  Tensor tq = tensor_of(qkv, Shape{B, T, 3 * C}), to = Tensor::empty(Shape{B, T, C}, DType::f32),
         tl = Tensor::empty(Shape{B, NH, T}, DType::f32), tdo = tensor_of(dout, Shape{B, T, C}),
         tdq = Tensor::empty(Shape{B, T, 3 * C}, DType::f32);
  ops::attention_forward(tq, to, tl, NH);
  ops::attention_backward(tq, to, tl, tdo, tdq, NH);
  expect_ok("attention ops");
  // Against the CPU's attention (another order of sums): close.
  std::vector<float> o32(B * T * C), l32(B * NH * T), dq32(B * T * 3 * C), q32 = qkv.f32(), d32 = dout.f32();
  strata::cpu::attention_forward(q32.data(), o32.data(), l32.data(), B, T, C, NH);
  strata::cpu::attention_backward(q32.data(), o32.data(), l32.data(), d32.data(), dq32.data(), B, T, C, NH);
  expect_close("attention_forward op", arr_of(to, DT::f32), std::vector<double>(o32.begin(), o32.end()), 1e-5, 1e-6);
  expect_close("attention_backward op", arr_of(tdq, DT::f32), std::vector<double>(dq32.begin(), dq32.end()), 1e-4, 1e-5);
}

}  // namespace
}  // namespace cuda_emu_test
