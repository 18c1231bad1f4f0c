// The meta-CUDA op table (framework/backend/ops/meta_cuda_table.cpp), on which the memory planner
// runs a GPU job's step, against the CUDA op layer it stands for: for each op and dtype
// combination, the workspace the meta table charges (the ledger's peak and what is left after the
// op) equals what the CUDA op layer (*_op.cpp, compiled here under the stand-in runtime) charges
// while its kernels run on the emulator. The products (gemm_op.cpp needs cuBLASLt) are checked
// through their shared policy, gemm_plan (cuda/ops/workspace_sizes.hpp), and the meta table's
// charges for them against what that policy says product() allocates.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "framework/backend/cuda/ops/embedding.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda/ops/workspace_sizes.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/core/meta_device.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/optim/quantize.hpp"
#include "tests/cuda_emu/harness.hpp"

namespace cuda_emu_test {
namespace {

using strata::Category;
using strata::Device;
using strata::MemoryLedger;
using strata::Shape;
using strata::Tensor;
using strata::TensorOptions;
using strata::Tier;
namespace ops = strata::ops;
namespace cu = strata::cuda_ops;

// The CUDA op layer's entries this test can run (all but the products).
ops::OpTable cuda_layer() {
  ops::OpTable t;
  t.name = "cuda (emulated)";
#define STRATA_META_CUDA_TEST_SET(op) t.op = cu::op;
  STRATA_META_CUDA_TEST_SET(layernorm_forward)
  STRATA_META_CUDA_TEST_SET(layernorm_backward)
  STRATA_META_CUDA_TEST_SET(gelu_forward)
  STRATA_META_CUDA_TEST_SET(gelu_backward)
  STRATA_META_CUDA_TEST_SET(attention_forward)
  STRATA_META_CUDA_TEST_SET(attention_backward)
  STRATA_META_CUDA_TEST_SET(embedding_forward)
  STRATA_META_CUDA_TEST_SET(embedding_backward)
  STRATA_META_CUDA_TEST_SET(cross_entropy_forward)
  STRATA_META_CUDA_TEST_SET(cross_entropy_backward)
  STRATA_META_CUDA_TEST_SET(row_max)
  STRATA_META_CUDA_TEST_SET(row_sum_exp)
  STRATA_META_CUDA_TEST_SET(target_logit)
  STRATA_META_CUDA_TEST_SET(cross_entropy_backward_slice)
  STRATA_META_CUDA_TEST_SET(combine_cross_entropy)
  STRATA_META_CUDA_TEST_SET(add)
  STRATA_META_CUDA_TEST_SET(add_inplace)
  STRATA_META_CUDA_TEST_SET(scale_inplace)
  STRATA_META_CUDA_TEST_SET(cast)
  STRATA_META_CUDA_TEST_SET(sum_squares)
  STRATA_META_CUDA_TEST_SET(has_inf_or_nan)
  STRATA_META_CUDA_TEST_SET(adamw_step)
  STRATA_META_CUDA_TEST_SET(sgd_step)
  STRATA_META_CUDA_TEST_SET(lion_step)
  STRATA_META_CUDA_TEST_SET(adamw8bit_step)
  STRATA_META_CUDA_TEST_SET(lion8bit_step)
  STRATA_META_CUDA_TEST_SET(sum_squares_add)
  STRATA_META_CUDA_TEST_SET(adafactor_sq_sums)
  STRATA_META_CUDA_TEST_SET(adafactor_factored_sumsq)
  STRATA_META_CUDA_TEST_SET(adafactor_vector_sumsq)
  STRATA_META_CUDA_TEST_SET(lamb_sums)
  STRATA_META_CUDA_TEST_SET(lamb_apply)
#undef STRATA_META_CUDA_TEST_SET
  return t;
}

// An operand: its shape and dtype, and for i32 tokens the bound of their values. An undefined
// operand: kNone.
struct Spec {
  Shape shape;
  DType dtype = DType::f32;
  int token_hi = 0;   // i32: tokens uniform in [0, token_hi)
  bool none = false;  // an undefined operand
};
const Spec kNone{Shape{1}, DType::f32, 0, true};
Spec f(Shape s, DT d = DT::f32) { return Spec{std::move(s), dtype(d)}; }

using Call = std::function<void(const ops::OpTable&, std::vector<Tensor>&)>;

struct Charged {
  std::uint64_t peak = 0, left = 0;
};

// Runs `call` on operands made from `specs` on the emulated CUDA layer (host tensors, pointer
// checks off) or on the meta-CUDA table, and returns the device tier's workspace it charged.
Charged charged(bool meta, const std::vector<Spec>& specs, const Call& call) {
  MemoryLedger ledger;
  const TensorOptions o{meta ? strata::meta_cuda() : Device::cpu(), Tier::device, Category::other,
                        &ledger};
  std::mt19937 g(91);
  std::vector<Tensor> ts;
  for (const Spec& s : specs) {
    if (s.none) {
      ts.emplace_back();
      continue;
    }
    Tensor t = Tensor::zeros(s.shape, s.dtype, o);
    if (!meta && t.numel() > 0) {
      if (s.dtype == DType::i32) {
        std::uniform_int_distribution<int> d(0, s.token_hi - 1);
        auto* p = static_cast<std::int32_t*>(t.raw());
        for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = d(g);
      } else if (s.dtype == DType::f32 || s.dtype == DType::bf16 || s.dtype == DType::f16) {
        const DT d = s.dtype == DType::f32 ? DT::f32 : s.dtype == DType::bf16 ? DT::bf16 : DT::f16;
        const HostArr a = random_arr(d, t.numel(), g, 0.5f);
        std::memcpy(t.raw(), a.data(), a.bytes.size());
      }
    }
    ts.push_back(std::move(t));
  }
  const auto ws = [&] {
    return ledger.snapshot().current[static_cast<int>(Tier::device)][static_cast<int>(Category::workspace)];
  };
  const std::uint64_t before = ws();
  {
    static const ops::OpTable layer = cuda_layer();
    call(meta ? ops::meta_cuda_op_table() : layer, ts);
  }
  const auto snap = ledger.snapshot();
  Charged c;
  c.peak = snap.peak[static_cast<int>(Tier::device)][static_cast<int>(Category::workspace)] - before;
  c.left = ws() - before;
  return c;
}

void expect_same(const std::string& what, const std::vector<Spec>& specs, const Call& call) {
  emu::set_pointer_checks(false);
  const Charged cuda = charged(false, specs, call);
  emu::set_pointer_checks(true);
  expect_ok(what + " (emulated CUDA op)");
  const Charged meta = charged(true, specs, call);
  checked();
  if (cuda.peak != meta.peak || cuda.left != meta.left)
    fail("%s: the meta-CUDA table charges workspace peak %llu, left %llu; the CUDA op layer %llu, "
         "%llu", what.c_str(), static_cast<unsigned long long>(meta.peak),
         static_cast<unsigned long long>(meta.left), static_cast<unsigned long long>(cuda.peak),
         static_cast<unsigned long long>(cuda.left));
}

// The emulator's CUB answers the meta table's question, as a GPU's would (cuda_table.cpp).
bool emu_dwte_bytes(std::int64_t n, std::int64_t rows, std::size_t* bytes) {
  return cu::embedding_dwte_scratch_bytes(n, rows, bytes, nullptr) == cudaSuccess;
}
struct EmuQueries {
  EmuQueries() { ops::set_meta_cuda_queries({nullptr, emu_dwte_bytes}); }
  ~EmuQueries() { ops::set_meta_cuda_queries({}); }
};

std::string dn(DT d) { return name(d); }

EMU_TEST("meta_cuda", layers_charge_what_the_cuda_ops_allocate) {
  EmuQueries q;
  for (const DT d : kFloatDTs) {
    for (const DT w : {DT::f32, d}) {
      const std::string k = " x " + dn(d) + " w " + dn(w);
      // layernorm [N, C]: N = 300 (10 strips of 32 rows) and 1 row.
      for (const int N : {300, 1, 0}) {
        const int C = 40;
        const std::string kn = k + fmt(" N %d", N);
        expect_same("layernorm_forward" + kn,
                    {f({N, C}, d), f({C}, w), f({C}, w), f({N, C}, d), f({N}), f({N})},
                    [](const ops::OpTable& t, std::vector<Tensor>& v) {
                      t.layernorm_forward(v[0], v[1], v[2], v[3], v[4], v[5], 1e-5f);
                    });
        for (const bool grads : {true, false})
          expect_same("layernorm_backward" + kn + (grads ? " dw db" : " no dw/db"),
                      {f({N, C}, d), f({N, C}, d), f({C}, w), f({N}), f({N}), f({N, C}, d),
                       grads ? f({C}, w) : kNone, grads ? f({C}, w) : kNone},
                      [](const ops::OpTable& t, std::vector<Tensor>& v) {
                        t.layernorm_backward(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
                      });
      }
    }
    const std::string k = " " + dn(d);
    expect_same("gelu_forward" + k, {f({100}, d), f({100}, d)},
                [](const ops::OpTable& t, std::vector<Tensor>& v) { t.gelu_forward(v[0], v[1]); });
    expect_same("gelu_backward" + k, {f({100}, d), f({100}, d), f({100}, d)},
                [](const ops::OpTable& t, std::vector<Tensor>& v) { t.gelu_backward(v[0], v[1], v[2]); });
    // attention: B 2, T 9, 2 heads of 8.
    const int B = 2, T = 9, NH = 2, C = 16;
    expect_same("attention_forward" + k, {f({B, T, 3 * C}, d), f({B, T, C}, d), f({B, NH, T})},
                [](const ops::OpTable& t, std::vector<Tensor>& v) {
                  t.attention_forward(v[0], v[1], v[2], 2);
                });
    expect_same("attention_backward" + k,
                {f({B, T, 3 * C}, d), f({B, T, C}, d), f({B, NH, T}), f({B, T, C}, d),
                 f({B, T, 3 * C}, d)},
                [](const ops::OpTable& t, std::vector<Tensor>& v) {
                  t.attention_forward(v[0], v[1], v[2], 2);
                  t.attention_backward(v[0], v[1], v[2], v[3], v[4], 2);
                });
    // embedding: tokens [3, 20] over 50 rows (and a vocabulary slice of 30 rows from 10).
    const int V = 50, Cw = 9, Bt = 3, Tt = 20;
    const Spec tok{Shape{Bt, Tt}, DType::i32, V};
    // Checked in the op (its flag is a workspace) or by the caller (none).
    for (const auto check : {strata::ops::TokenCheck::in_op, strata::ops::TokenCheck::done_by_caller}) {
      const std::string kc = k + (check == strata::ops::TokenCheck::in_op ? "" : " caller-checked");
      expect_same("embedding_forward" + kc, {tok, f({V, Cw}, d), f({Tt, Cw}, d), f({Bt * Tt, Cw}, d)},
                  [check](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.embedding_forward(v[0], v[1], v[2], v[3], -1, check);
                  });
      for (const bool dwte : {true, false})
        for (const bool slice : {false, true})
          expect_same("embedding_backward" + kc + (dwte ? " dwte" : " no dwte") + (slice ? " slice" : ""),
                      {tok, f({Bt * Tt, Cw}, d), dwte ? f({slice ? 30 : V, Cw}, d) : kNone,
                       f({Tt, Cw}, d)},
                      [slice, check](const ops::OpTable& t, std::vector<Tensor>& v) {
                        t.embedding_backward(v[0], v[1], v[2], v[3], slice ? 10 : -1, check);
                      });
    }
    // cross-entropy: logits [N, 37].
    for (const int N : {24, 0}) {
      const Spec tg{Shape{N}, DType::i32, 37};
      const std::string kn = k + fmt(" N %d", N);
      expect_same("cross_entropy_forward" + kn, {f({N, 37}, d), tg, f({N}), Spec{Shape{1}, DType::f64}},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.cross_entropy_forward(v[0], v[1], v[2], v[3]);
                  });
      expect_same("cross_entropy_backward" + kn, {f({N, 37}, d), f({N}), tg, f({N, 37}, d)},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.cross_entropy_backward(v[0], v[1], v[2], v[3], 0.5f);
                  });
      expect_same("row_max, row_sum_exp, target_logit, backward_slice" + kn,
                  {f({N, 37}, d), f({N}), f({N}), tg, f({N}), f({N, 37}, d)},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.row_max(v[0], v[1]);
                    t.row_sum_exp(v[0], v[1], v[2]);
                    t.target_logit(v[0], v[3], 0, v[4]);
                    t.cross_entropy_backward_slice(v[0], v[2], v[3], 0, 0.5f, v[5]);
                  });
      expect_same("combine_cross_entropy" + kn, {f({N}), f({N}), f({N}), tg, f({N}), Spec{Shape{1}, DType::f64}},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.combine_cross_entropy(v[0], v[1], v[2], v[3], v[4], v[5]);
                  });
    }
  }
}

EMU_TEST("meta_cuda", elementwise_and_reductions_charge_what_the_cuda_ops_allocate) {
  for (const DT a : kFloatDTs) {
    for (const DT b : kFloatDTs) {
      const std::string k = " " + dn(a) + " " + dn(b);
      expect_same("add, add_inplace, scale, cast" + k, {f({70}, a), f({70}, b), f({70}, a)},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.add(v[0], v[1], v[2]);
                    t.add_inplace(v[0], v[1]);
                    t.scale_inplace(v[0], 0.5f);
                    t.cast(v[0], v[1]);
                  });
    }
    // The sum of squares' grid: 1 block, several, and the 1024-block cap.
    for (const std::int64_t n : {std::int64_t{0}, std::int64_t{37}, std::int64_t{9000},
                                 std::int64_t{70000}}) {
      const std::string k = " " + dn(a) + fmt(" n %lld", static_cast<long long>(n));
      expect_same("sum_squares" + k, {f({n}, a)},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) { t.sum_squares(v[0]); });
      expect_same("has_inf_or_nan" + k, {f({n}, a)},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) { t.has_inf_or_nan(v[0]); });
    }
  }
}

EMU_TEST("meta_cuda", optimizers_charge_what_the_cuda_ops_allocate) {
  namespace optim = strata::optim;
  const std::int64_t n = 2 * 2048 + 300;
  const auto un = static_cast<std::size_t>(n);
  const auto nb = static_cast<std::int64_t>(optim::quant_blocks(un));
  for (const DT g : kFloatDTs) {
    for (const bool p16 : {false, true}) {
      const std::string k = " grad " + dn(g) + (p16 ? " param16" : "");
      const Spec h = p16 ? f({n}, DT::bf16) : kNone;
      expect_same("adamw, sgd, lion" + k, {f({n}), f({n}, g), f({n}), f({n}), h},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.adamw_step(v[0], v[1], v[2], v[3], optim::AdamWHyper{}, 1, 1.0f, v[4]);
                    t.sgd_step(v[0], v[1], v[2], optim::SGDHyper{}, 1, 1.0f, v[4]);
                    t.lion_step(v[0], v[1], v[2], optim::LionHyper{}, 1, 1.0f, v[4]);
                  });
    }
    // 8-bit: 3 runs (by value) and 87 (a workspace).
    for (const std::size_t every : {std::size_t{2000}, std::size_t{50}}) {
      std::vector<optim::DecayRun> runs;
      for (std::size_t b = 0; b < un; b += every)
        runs.push_back({b, std::min(b + every, un), (b / every) % 2 == 0});
      const std::string k = " grad " + dn(g) + fmt(" %zu runs", runs.size());
      expect_same("adamw8bit, lion8bit" + k,
                  {f({n}), f({n}, g), Spec{Shape{n}, DType::u8}, Spec{Shape{n}, DType::u8},
                   f({nb}), f({nb})},
                  [runs](const ops::OpTable& t, std::vector<Tensor>& v) {
                    optim::AdamWHyper h;
                    h.weight_decay = 0.1;
                    t.adamw8bit_step(v[0], v[1], v[2], v[3], v[4], v[5], runs, h, 1, 1.0f, Tensor());
                    t.lion8bit_step(v[0], v[1], v[2], v[4], runs, optim::LionHyper{1e-3, 0.9, 0.99, 0.1},
                                    1, 1.0f, Tensor());
                  });
    }
  }
  // Adafactor's and LAMB's sums: one chunk and several.
  for (const std::int64_t m : {std::int64_t{300}, std::int64_t{40000}}) {
    const std::string k = fmt(" n %lld", static_cast<long long>(m));
    const std::int64_t cols = 100, rows = (m + cols - 1) / cols;
    expect_same("sum_squares_add" + k, {f({m}, DT::bf16), Spec{Shape{1}, DType::f64}},
                [](const ops::OpTable& t, std::vector<Tensor>& v) { t.sum_squares_add(v[0], v[1]); });
    expect_same("adafactor sums" + k,
                {f({m}), Spec{Shape{rows}, DType::f64}, Spec{Shape{cols}, DType::f64}, f({rows}),
                 f({cols}), Spec{Shape{1}, DType::f64}, f({m})},
                [cols](const ops::OpTable& t, std::vector<Tensor>& v) {
                  t.adafactor_sq_sums(v[0], 0, cols, 1.0f, 1e-30f, v[1], v[2]);
                  t.adafactor_factored_sumsq(v[0], 0, cols, 1.0f, v[3], v[4], v[5]);
                  t.adafactor_vector_sumsq(v[0], v[6], 1.0f, 1e-30f, 0.9, v[5]);
                });
    expect_same("lamb" + k, {f({m}), f({m}), f({m}), f({m}), Spec{Shape{2}, DType::f64}},
                [](const ops::OpTable& t, std::vector<Tensor>& v) {
                  t.lamb_sums(v[0], v[1], v[2], v[3], strata::optim::LambHyper{}, 1.0f, v[4]);
                  t.lamb_apply(v[0], v[1], v[2], v[3], strata::optim::LambHyper{}, 1.0f, 1e-3, 1.0,
                               Tensor());
                });
  }
}

// Without the runtime's answer the plan charges embedding backward an upper bound of CUB's storage:
// at least what the (emulated) CUB asks for.
EMU_TEST("meta_cuda", embedding_scratch_bound_covers_cub) {
  ops::set_meta_cuda_queries({});
  for (const std::int64_t n : {1, 60, 2048, 100000})
    for (const std::int64_t rows : {1, 50, 256, 50257}) {
      std::size_t exact = 0;
      expect_ok("dwte scratch query", cu::embedding_dwte_scratch_bytes(n, rows, &exact, nullptr));
      const std::size_t bound = cu::embedding_dwte_scratch_total(
          n, cu::embedding_dwte_cub_bound(n, cu::embedding_key_bits(rows)));
      checked();
      if (bound < exact)
        fail("n %lld rows %lld: bound %zu < CUB's %zu", static_cast<long long>(n),
             static_cast<long long>(rows), bound, exact);
    }
}

// The products' policy (gemm_op.cpp's product() decides with gemm_plan), and the meta table's
// charges for matmul and linear against what that policy has product() allocate.
EMU_TEST("meta_cuda", gemm_policy) {
  const auto plan = [](DT a, DT b, DT c, float beta, bool bias = false, DT bdt = DT::f32,
                       bool bf16 = true) { return cu::gemm_plan(a, b, c, beta, bias, bdt, bf16); };
  const auto expect = [](const std::string& what, const cu::GemmPlan& p, bool direct, bool wa,
                         bool wb, bool d32) {
    checked();
    if (p.direct != direct || p.widen_a != wa || p.widen_b != wb || p.f32_d != d32)
      fail("%s: direct %d widen A %d widen B %d f32 D %d, expected %d %d %d %d", what.c_str(),
           p.direct, p.widen_a, p.widen_b, p.f32_d, direct, wa, wb, d32);
  };
  // 16-bit operands of one dtype: direct; C written in place when f32 or of that dtype with beta 0.
  for (const DT h : {DT::bf16, DT::f16}) {
    const std::string k = dn(h);
    expect(k + " -> f32 C", plan(h, h, DT::f32, 0.0f), true, false, false, false);
    expect(k + " -> f32 C beta 1", plan(h, h, DT::f32, 1.0f), true, false, false, false);
    expect(k + " -> same C", plan(h, h, h, 0.0f), true, false, false, false);
    // 16-bit C with beta != 0 (dW += dy^T x): always the f32 workspace (the H200's rounding).
    expect(k + " -> same C beta 1", plan(h, h, h, 1.0f), true, false, false, true);
    expect(k + " -> same C bias of C's dtype", plan(h, h, h, 0.0f, true, h), true, false, false, false);
    expect(k + " -> same C f32 bias", plan(h, h, h, 0.0f, true, DT::f32), true, false, false, true);
    const DT o = h == DT::bf16 ? DT::f16 : DT::bf16;
    expect(k + " -> other 16-bit C", plan(h, h, o, 0.0f), true, false, false, true);
    // Mixed operands: the 16-bit one(s) widened, an f32 product.
    expect(k + " x f32", plan(h, DT::f32, DT::f32, 0.0f), false, true, false, false);
    expect("f32 x " + k, plan(DT::f32, h, h, 0.0f), false, false, true, true);
    expect(k + " x " + dn(o), plan(h, o, DT::f32, 0.0f), false, true, true, false);
  }
  expect("f32", plan(DT::f32, DT::f32, DT::f32, 1.0f, true, DT::f32), false, false, false, false);
  expect("f32 -> bf16 C", plan(DT::f32, DT::f32, DT::bf16, 0.0f), false, false, false, true);
  // Before sm_80: bf16 widened, f16 direct.
  expect("bf16 on sm_75", plan(DT::bf16, DT::bf16, DT::bf16, 0.0f, false, DT::f32, false), false,
         true, true, true);
  expect("f16 on sm_75", plan(DT::f16, DT::f16, DT::f16, 0.0f, false, DT::f32, false), true, false,
         false, false);

  // The meta table: matmul and linear charge what the plan says, kept for the op (widenings) or
  // for one product (D), and linear's db its column-sum strips.
  const std::int64_t N = 200, in = 24, out = 40;
  for (const DT x : kFloatDTs)
    for (const DT w : kFloatDTs) {
      const std::string k = " x " + dn(x) + " W " + dn(w);
      MemoryLedger ledger;
      const TensorOptions o{strata::meta_cuda(), Tier::device, Category::other, &ledger};
      const Tensor tx = Tensor::empty(Shape{N, in}, dtype(x), o),
                   tw = Tensor::empty(Shape{out, in}, dtype(w), o),
                   tb = Tensor::empty(Shape{out}, dtype(w), o),
                   tdy = Tensor::empty(Shape{N, out}, dtype(x), o),
                   tdx = Tensor::empty(Shape{N, in}, dtype(x), o),
                   tdw = Tensor::empty(Shape{out, in}, dtype(w), o);
      const auto ws = [&] {
        const auto s = ledger.snapshot();
        return std::pair{s.peak[static_cast<int>(Tier::device)][static_cast<int>(Category::workspace)],
                         s.current[static_cast<int>(Tier::device)][static_cast<int>(Category::workspace)]};
      };
      // The expected peak of linear_backward: widenings of dy, W (dx) then x (dW), D of each
      // product while it runs, then db's strips with the widenings still held.
      const cu::GemmPlan pdx = plan(x, w, x, 0.0f), pdw = plan(x, x, w, 1.0f);
      const std::uint64_t wdy = (pdx.widen_a || pdw.widen_a) && x != DT::f32 ? N * out * 4 : 0;
      const std::uint64_t ww = pdx.widen_b ? out * in * 4 : 0;
      const std::uint64_t wx = pdw.widen_b ? N * in * 4 : 0;
      const std::uint64_t after_dx = (pdx.widen_a ? wdy : 0) + ww;
      const std::uint64_t held = wdy + ww + wx;
      std::uint64_t want = std::max<std::uint64_t>(after_dx + (pdx.f32_d ? N * in * 4 : 0),
                                                   held + (pdw.f32_d ? out * in * 4 : 0));
      want = std::max<std::uint64_t>(
          want, held + static_cast<std::uint64_t>(cu::column_sum_plan(N, out).strips * out * 4));
      ops::meta_cuda_op_table().linear_backward(tx, tw, tdy, tdx, tdw, tb);
      auto [peak, left] = ws();
      checked();
      if (peak != want || left != 0)
        fail("linear_backward%s: meta-CUDA peak %llu left %llu, expected %llu and 0", k.c_str(),
             static_cast<unsigned long long>(peak), static_cast<unsigned long long>(left),
             static_cast<unsigned long long>(want));
    }
}

}  // namespace
}  // namespace cuda_emu_test
