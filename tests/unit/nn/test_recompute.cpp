// Activation recomputation (framework/nn/recompute.hpp): none, selective and full give bitwise the
// same loss and gradients (f32 and bf16, whole model and tensor-parallel parts), and the bytes a
// transformer block keeps for backward, measured by the memory ledger, are exactly
// nn::gpt_block_activation_bytes at tp 1, 2, 4 in f32 and bf16 — on real tensors for a small GPT
// and on the meta device at GPT-3 175B's layer shape, printed beside Korthikanti et al.'s (2022)
// formula (the table in bench/README.md).
#include <gtest/gtest.h>

#include <cstdio>

#include <fmt/format.h>

#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"

using namespace strata;

namespace {
namespace test_recompute {  // file-local names, unique in a unity build

constexpr nn::Recompute kModes[] = {nn::Recompute::none, nn::Recompute::selective,
                                    nn::Recompute::full};

const char* mode_name(nn::Recompute m) {
  return m == nn::Recompute::none ? "none" : m == nn::Recompute::selective ? "selective" : "full";
}

// A tensor-parallel group of one process: the collectives do nothing (an all-gather leaves its
// output as allocated). A part's saved bytes do not depend on the values its collectives would
// bring (the gradient test runs tp 1 only; sequence-parallel parts run on the meta device only).
class SoloTpComm : public nn::TpComm {
 public:
  explicit SoloTpComm(nn::TpShard tp) : tp_(tp) {}
  nn::TpShard shard() const override { return tp_; }
  void all_reduce_sum(const Tensor&) override {}
  void all_reduce_max(const Tensor&) override {}
  void all_gather(const Tensor&, const Tensor&) override {}
  void reduce_scatter_sum(const Tensor&, const Tensor&) override {}

 private:
  nn::TpShard tp_;
};

nn::GptConfig small_config(int n_layer) {
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = n_layer;
  c.n_head = 4;
  c.n_embd = 32;
  return c;
}

std::vector<std::int32_t> make_tokens(int n, int V, std::uint64_t seed) {
  Philox r(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>(r.next_below(V));
  return t;
}

struct Measured {
  double loss = 0;
  std::vector<float> grads;
  std::uint64_t after_forward = 0;  // activations held between forward and backward
  std::uint64_t peak = 0;           // activations' peak over forward and backward
};

// One forward and backward of a GPT part (tp part 0 of `tp`, with or without sequence
// parallelism) on `device` (cpu or meta).
Measured run_gpt(const nn::GptConfig& c, nn::TpShard tp, DType dt, nn::Recompute mode, int B,
                 int T, Device device = Device::cpu()) {
  MemoryLedger ledger;
  nn::Gpt gpt(c, tp);
  nn::ParamStore store(gpt.units(), nn::ParamStoreOptions{
                                        dt, dt, 1, TensorOptions{device, Tier::device, Category::other, &ledger}});
  store.initialize(42);
  gpt.set_recompute(mode);
  SoloTpComm comm(tp);
  nn::Context ctx;
  ctx.activations.device = ctx.workspace.device = device;
  ctx.activations.ledger = ctx.workspace.ledger = &ledger;
  ctx.act_dtype = dt;
  if (tp.size > 1) ctx.tp = &comm;
  const auto toks = make_tokens(B * T + 1, c.vocab_size, 7);
  const std::vector<std::int32_t> in(toks.begin(), toks.end() - 1), tgt(toks.begin() + 1, toks.end());
  Measured r;
  r.loss = gpt.forward(ctx, in.data(), tgt.data(), B, T);
  r.after_forward = ledger.current(Tier::device, Category::activations);
  gpt.backward(ctx, 1.0f);
  EXPECT_EQ(ledger.current(Tier::device, Category::activations), 0u) << "activations leaked";
  r.peak = ledger.peak(Tier::device, Category::activations);
  if (!device.is_meta())
    for (auto* p : store.parameters()) {
      const auto v = p->grad.to_vector();
      r.grads.insert(r.grads.end(), v.begin(), v.end());
    }
  return r;
}

TEST(Recompute, EveryModeGivesBitwiseTheSameLossAndGradients) {
  const auto c = small_config(2);
  for (const DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Measured none = run_gpt(c, {}, dt, nn::Recompute::none, 3, 16);
    for (const nn::Recompute m : {nn::Recompute::selective, nn::Recompute::full}) {
      SCOPED_TRACE(mode_name(m));
      const Measured r = run_gpt(c, {}, dt, m, 3, 16);
      EXPECT_EQ(r.loss, none.loss);
      ASSERT_EQ(r.grads.size(), none.grads.size());
      for (std::size_t i = 0; i < r.grads.size(); ++i)
        ASSERT_EQ(r.grads[i], none.grads[i]) << "element " << i;
      // Less kept between forward and backward, and a lower peak over the step.
      EXPECT_LT(r.after_forward, none.after_forward);
      EXPECT_LE(r.peak, none.peak);
    }
  }
}

// Evaluation (nothing saved) runs the selective path too and gives the same logits.
TEST(Recompute, EvaluationIsUnchanged) {
  const auto c = small_config(2);
  std::vector<std::vector<float>> logits;
  for (const nn::Recompute m : kModes) {
    nn::Gpt gpt(c);
    nn::ParamStore store(gpt.units(), nn::ParamStoreOptions{DType::f32, DType::f32, 1, {}});
    store.initialize(3);
    gpt.set_recompute(m);
    nn::Context ctx;
    ctx.grad_enabled = false;
    const auto toks = make_tokens(2 * 16, c.vocab_size, 5);
    logits.push_back(gpt.logits(ctx, toks.data(), 2, 16).to_vector());
    EXPECT_TRUE(ctx.saved->empty());
  }
  EXPECT_EQ(logits[1], logits[0]);
  EXPECT_EQ(logits[2], logits[0]);
}

// A block's bytes: the activations held after forward with two blocks minus those with one.
std::int64_t measured_block_bytes(const nn::GptConfig& c, nn::TpShard tp, DType dt,
                                  nn::Recompute m, int B, int T, Device device) {
  nn::GptConfig one = c, two = c;
  one.n_layer = 1;
  two.n_layer = 2;
  return static_cast<std::int64_t>(run_gpt(two, tp, dt, m, B, T, device).after_forward) -
         static_cast<std::int64_t>(run_gpt(one, tp, dt, m, B, T, device).after_forward);
}

TEST(Recompute, BlockActivationBytesAreTheFormulaOnRealTensors) {
  const auto c = small_config(2);
  const int B = 2, T = 16;
  for (const DType dt : {DType::f32, DType::bf16})
    for (const int tp : {1, 2, 4})
      for (const nn::Recompute m : kModes) {
        SCOPED_TRACE(fmt::format("{} tp {} {}", dtype_name(dt), tp, mode_name(m)));
        EXPECT_EQ(measured_block_bytes(c, nn::TpShard{0, tp}, dt, m, B, T, Device::cpu()),
                  nn::gpt_block_activation_bytes(c, nn::TpShard{0, tp}, std::int64_t{B} * T, dt, m));
      }
}

// Korthikanti et al. (2022), "Reducing Activation Recomputation in Large Transformer Models",
// Table 2: bytes per layer with 16-bit activations and dropout masks. Tensor parallelism without
// sequence parallelism: none s·b·h·(10 + 24/t + 5·a·s/(h·t)), selective s·b·h·(10 + 24/t), full
// 2·s·b·h. With sequence parallelism (or t = 1): none s·b·h·(34 + 5·a·s/h)/t, selective
// s·b·h·34/t, full 2·s·b·h/t (the table's full row does not split; with sequence parallelism the
// kept block input is the rank's 1/t of the tokens).
double megatron_bytes(double s, double b, double h, double a, double t, bool sp, nn::Recompute m) {
  const bool split = sp || t == 1;
  switch (m) {
    case nn::Recompute::none:
      return s * b * h * (split ? (34 + 5 * a * s / h) / t : 10 + 24 / t + 5 * a * s / (h * t));
    case nn::Recompute::selective:
      return s * b * h * (split ? 34 / t : 10 + 24 / t);
    case nn::Recompute::full:
      return 2 * s * b * h / (split ? t : 1);
  }
  return 0;
}

// At GPT-3 175B's layer shape (s = 2048, h = 12288, a = 96, b = 1), on the meta device (nothing is
// computed; the ledger charges every allocation as on the CPU): measured = formula, exactly, at
// tp 1, 2, 4, with and without sequence parallelism, and the table with the paper's figures beside
// it.
TEST(Recompute, ActivationBytesPerLayerTable) {
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 2048;
  c.n_layer = 2;
  c.n_head = 96;
  c.n_embd = 12288;
  const int B = 1, T = 2048;
  const double s = T, b = B, h = c.n_embd, a = c.n_head;
  const double sbh = s * b * h;
  std::string table =
      "| dtype | t | SP | mode | measured (ledger) | Strata's formula | / s·b·h | Megatron's formula | "
      "/ s·b·h | Strata / none | Megatron / none |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const DType dt : {DType::f32, DType::bf16})
    for (const int tp : {1, 2, 4})
      for (const bool sp : {false, true}) {
        if (sp && tp == 1) continue;
        const nn::TpShard shard{0, tp, sp};
        const double strata_none = static_cast<double>(nn::gpt_block_activation_bytes(
            c, shard, std::int64_t{B} * T, dt, nn::Recompute::none));
        const double megatron_none = megatron_bytes(s, b, h, a, tp, sp, nn::Recompute::none);
        for (const nn::Recompute m : kModes) {
          const std::int64_t got = measured_block_bytes(c, shard, dt, m, B, T, Device::meta());
          const std::int64_t want =
              nn::gpt_block_activation_bytes(c, shard, std::int64_t{B} * T, dt, m);
          EXPECT_EQ(got, want) << dtype_name(dt) << " tp " << tp << " sequence parallel " << sp
                               << " " << mode_name(m);
          // The paper's bytes are for 16-bit activations: beside the bf16 rows only; its ratios
          // beside every row.
          const double mega = megatron_bytes(s, b, h, a, tp, sp, m);
          const std::string mega_bytes =
              dt == DType::bf16 ? fmt::format("{:.1f} MiB | {:.2f}", mega / 1048576.0, mega / sbh)
                                : std::string("(16-bit) | ");
          table += fmt::format("| {} | {} | {} | {} | {:.1f} MiB | {:.1f} MiB | {:.2f} | {} | "
                               "{:.3f} | {:.3f} |\n",
                               dtype_name(dt), tp, tp == 1 ? "–" : sp ? "on" : "off", mode_name(m),
                               static_cast<double>(got) / 1048576.0,
                               static_cast<double>(want) / 1048576.0,
                               static_cast<double>(want) / sbh, mega_bytes,
                               static_cast<double>(want) / strata_none, mega / megatron_none);
        }
      }
  std::printf("activation bytes per layer, s = %d, b = %d, h = %d, a = %d (GPT-3 175B's layer):\n%s",
              T, B, c.n_embd, c.n_head, table.c_str());
}

}  // namespace test_recompute
}  // namespace
