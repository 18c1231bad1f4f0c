// Tensor and pipeline parallelism together (3D: dp x tp x pp). tp = 2 parts inside each of pp = 2
// stages (and dp = N / 4 replicas, at every ZeRO stage) compute the same model as one rank: over
// 10 steps (also with sequence parallelism at ZeRO 1, with 1F1B and with the interleaved schedule
// of 2 chunks per rank, which trains bitwise like 1F1B at the same layout) every loss within 1e-6
// relative (gradient norms within 1e-5) of tp = pp = 1 over the dp ranks of this rank's (tp, pp)
// position fed the same micro-batches (and every loss within 1e-6 of literally one rank with the
// whole global batch, whose weights are within 1e-5), the final fp32 masters reassembled from
// parts and stages compared parameter by parameter, and the replicated parameters bitwise equal on
// every part. On 8 ranks, a checkpoint moves (dp 2, tp 2, pp 2, ZeRO 3) -> (dp 4, tp 1, pp 2,
// ZeRO 1) -> (dp 1, tp 1, pp 1, ZeRO 0) -> back to the first layout with masters and both moments
// bitwise equal at every hop and the next step's loss within 1e-6 of the run that went on.
#include <gtest/gtest.h>

#include "framework/checkpoint/naming.hpp"
#include "framework/memory/size.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/model_parallel_fixture.hpp"
#include "tests/dist/tensor/tensor_fixture.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_tensor_pipeline {

nn::GptConfig gpt_3d() {
  nn::GptConfig c = tp_gpt();  // 4 heads: splits over tp = 2
  c.n_layer = 4;               // a block or more per stage
  return c;
}

struct PipeCase {
  int zero;         // the ZeRO stage
  bool sp = false;  // sequence parallelism
  // Model chunks per pipeline rank (the interleaved schedule; it trains bitwise like 1F1B at the
  // same layout, which the test checks).
  int v = 1;
};

class TensorPipeline : public ::testing::TestWithParam<PipeCase> {};

TEST_P(TensorPipeline, ThreeDMatchesOneRankLayout) {
  const int zero = GetParam().zero;
  const bool sp = GetParam().sp;
  const int v = GetParam().v;
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() % 4 != 0) GTEST_SKIP() << "tp 2 x pp 2 needs a multiple of 4 ranks";
  const auto c = gpt_3d();
  const int b = 2, steps = 10, tp = 2, pp = 2, dp = w.size() / (tp * pp);
  // Micro-batches: a multiple of pp with v > 1. The count is also which rows a step trains on, and
  // some data put a gradient element near zero at step 1, where AdamW (lr 3e-3, eps 1e-6) moves it
  // by lr * g / (|g| + eps): its slope, near lr / eps there, turns tensor parallelism's reordered fp32
  // sums into a visible weight change. With 2 on 8 ranks h.0.attn.c_proj.bias[9] gets g = 3.8e-7,
  // rounded 1.5e-9 differently at tp 2, and the bias ends 1.4e-4 relative L2 from tp = pp = 1
  // after one step, 5.4e-5 after ten — the same figures with 1F1B (bitwise the same run) and with
  // tp 2 x dp 2 and no pipeline at all; with SGD that run stays within 7.5e-7, with eps 1e-5
  // within 9.7e-6 (docs/parallelism.md). With 4 on 4 ranks: 1.5e-5 (h.2.mlp.c_fc.bias).
  const int m = v == 1 ? 3 : dp == 1 ? 2 : 4;
  train::TrainerOptions o;
  // eps: see test_tensor_equivalence.cpp
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3, .eps = 1e-6});
  o.max_grad_norm = 0.5;
  config::Config cfg = tp_config(o, b, m, zero, tp);
  cfg.strata.pipeline_parallel_size = pp;
  cfg.strata.sequence_parallel = sp;
  cfg.strata.virtual_pipeline_stages = v;
  Replica par(c, cfg, w);
  // The interleaved job beside 1F1B at the same layout and data: bitwise the same training (the
  // chunks run the same blocks on the same micro-batches; every sum they feed is over the same
  // terms in the same order).
  std::unique_ptr<Replica> plain;
  if (v > 1) {
    config::Config one_f_one_b = cfg;
    one_f_one_b.strata.virtual_pipeline_stages = 1;
    plain = std::make_unique<Replica>(c, one_f_one_b, w);
  }
  // And literally one rank with the whole global batch (dp x b rows per micro-batch).
  Replica one(c, tp_config(o, dp * b, m, 0, 1), w.split(w.rank(), 0, "one3d"));
  const auto me = par.training->grid().coords();
  // tp = pp = 1 over the dp ranks at this rank's (tp, pp) position, ZeRO 0, the same data.
  Replica ref(c, tp_config(o, b, m, 0, 1), w.split(me.tp + tp * me.pp, me.dp, "ref3d"));
  EXPECT_TRUE(assemble_3d(*par.training) == by_name(*ref.training))
      << "the parts and stages do not start from the one-rank weights";
  BatchFeed feed{dp, me.dp, b, c.block_size, c.vocab_size};
  BatchFeed ref_feed{dp, me.dp, b, c.block_size, c.vocab_size};
  BatchFeed one_feed{1, 0, dp * b, c.block_size, c.vocab_size};
  // Losses within 1e-6 at every one of the 10 steps; the gradient norm, which by step 8 reads
  // weights that fp32 rounding has moved by a few 1e-6 (measured 1.07e-6 at dp 2), within 1e-5.
  // The one-rank run steps beside them: its losses within 1e-6 too.
  double worst_one = 0;
  parallel::DataParallelEngine& one_engine = one.engine;
  BatchFeed par_feed = feed, plain_feed = feed;
  StepAgreement agree;
  for (int s = 0; s < steps; ++s) {
    const auto a = par.engine.train_step(std::ref(par_feed));
    const auto r = ref.engine.train_step(std::ref(ref_feed));
    const auto u = one_engine.train_step(std::ref(one_feed));
    if (plain) {
      const auto p = plain->engine.train_step(std::ref(plain_feed));
      EXPECT_EQ(a.loss, p.loss) << "step " << s << ": interleaved and 1F1B losses differ";
      // (The norm's partial sums group the units by chunk: equal to double rounding.)
      EXPECT_NEAR(a.result.grad_norm, p.result.grad_norm, 1e-12 * p.result.grad_norm) << "step " << s;
    }
    agree.worst_loss = std::max(agree.worst_loss, std::abs(a.loss - r.loss) / r.loss);
    agree.worst_norm = std::max(agree.worst_norm, std::abs(a.result.grad_norm - r.result.grad_norm) /
                                                      r.result.grad_norm);
    worst_one = std::max(worst_one, std::abs(a.loss - u.loss) / u.loss);
    EXPECT_NEAR(a.loss, r.loss, 1e-6 * r.loss) << "step " << s;
    EXPECT_NEAR(a.result.grad_norm, r.result.grad_norm, 1e-5 * r.result.grad_norm) << "step " << s;
    EXPECT_NEAR(a.loss, u.loss, 1e-6 * u.loss) << "step " << s << " against one rank";
  }
  const auto mine = assemble_3d(*par.training);
  if (plain) {
    EXPECT_TRUE(mine == assemble_3d(*plain->training)) << "interleaved and 1F1B masters differ";
  }
  const WeightComparison cmp = compare_weights(mine, by_name(*ref.training), c.n_embd);
  const WeightComparison cmp_one = compare_weights(mine, by_name(*one.training), c.n_embd);
  const auto worst = w.all_reduce_values(std::array<double, 2>{cmp.worst_rel_l2, cmp.key_bias_abs},
                                         parallel::ReduceOp::max);
  if (w.rank() == 0)
    std::printf("dp=%d tp=%d%s pp=%d v=%d m=%d ZeRO %d: worst loss rel %.2e, grad norm rel %.2e, "
                "weights worst rel L2 of a parameter %.2e (key biases: max abs diff %.1e); against "
                "one rank: loss %.2e, weights %.2e%s\n",
                dp, tp, sp ? " (sequence parallel)" : "", pp, v, m, zero, agree.worst_loss,
                agree.worst_norm, worst[0], worst[1], worst_one, cmp_one.worst_rel_l2,
                plain ? "; bitwise the 1F1B run" : "");
  EXPECT_LT(cmp.worst_rel_l2, 1e-5) << cmp.worst;
  EXPECT_LT(cmp_one.worst_rel_l2, 1e-5) << cmp_one.worst << " against one rank";
  EXPECT_LT(cmp.key_bias_abs, 1e-4);
  EXPECT_TRUE(replicated_mismatches(*par.training).empty())
      << "replicated parameters differ between tensor-parallel parts";
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, TensorPipeline,
                         ::testing::Values(PipeCase{0}, PipeCase{1}, PipeCase{2}, PipeCase{3},
                                           PipeCase{1, true}, PipeCase{1, true, 2}),
                         [](const auto& i) {
                           return "zero" + std::to_string(i.param.zero) + (i.param.sp ? "_sp" : "") +
                                  (i.param.v > 1 ? "_v" + std::to_string(i.param.v) : "");
                         });

// Model-state bytes per rank follow ZeRO's formula over what the rank holds: its stage's
// parameters, split parameters as its tensor-parallel part (bf16 parameters and gradients, fp32
// master, m and v: 16 bytes per element at stage 0, sharded over dp by the stage), predicted
// exactly and measured within 5%; and the parts of the split parameters add up to the whole.
TEST(TensorPipelineMemory, ModelStatesFollowTheFormulaOfTheRanksShare) {
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() % 4 != 0) GTEST_SKIP() << "tp 2 x pp 2 needs a multiple of 4 ranks";
  const auto c = gpt_3d();
  const int tp = 2, pp = 2, dp = w.size() / (tp * pp);
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(fmt::format("dp {} ZeRO {}", dp, stage));
    MemoryLedger ledger;
    train::TrainerOptions o;
    o.precision = train::Precision::bf16;
    config::Config cfg = tp_config(o, 1, pp, stage, tp, DType::bf16);
    cfg.strata.pipeline_parallel_size = pp;
    Replica r(c, cfg, w, parallel::TrainingExtras::on(&ledger));
    BatchFeed feed{dp, r.training->grid().coords().dp, 1, c.block_size, c.vocab_size};
    r.engine.train_step(std::ref(feed));
    double psi = 0, split = 0;
    for (std::size_t u = 0; u < r.store.num_units(); ++u)
      psi += static_cast<double>(r.store.layout(u).padded);
    for (const nn::Parameter* p : r.store.parameters())
      if (p->placement.split()) split += static_cast<double>(p->shape.numel());
    const double n = dp;
    const double expect[4] = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n,
                              16 * psi / n};
    const auto predicted = r.training->predicted_model_states();
    const auto measured = r.training->measured_model_states();
    EXPECT_NEAR(predicted.total() / expect[stage], 1.0, 1e-9);
    EXPECT_NEAR(measured.total() / expect[stage], 1.0, 0.05)
        << "measured " << measured.total() << ", formula " << expect[stage];
    // The split parameters' parts over the tp group are the stage's whole split parameters.
    double whole_split = 0;
    for (const nn::Parameter* p : r.store.parameters())
      if (p->placement.split())
        whole_split += static_cast<double>(p->placement.global_shape(p->shape).numel());
    EXPECT_EQ(r.training->grid().tp().all_reduce_value(split, parallel::ReduceOp::sum), whole_split);
    if (w.rank() == 0)
      std::printf("dp=%d tp=2 pp=2 ZeRO %d: rank 0 Psi %.0f, model states %s (formula %s)\n", dp,
                  stage, psi, strata::format_bytes(static_cast<std::uint64_t>(measured.total())).c_str(),
                  strata::format_bytes(static_cast<std::uint64_t>(expect[stage])).c_str());
  }
}

// Everything else a job turns on, inside the 3D layout: 16-bit parameters and activations (bf16;
// fp16 with a dynamic loss scale, whose overflow check spans tp and pp), ZeRO 3, activation
// checkpointing, 3 micro-batches of accumulation, and offload of parameters and optimizer state
// to host memory and to NVMe: the same job with offload trains bitwise like without it (losses,
// norms, loss scale, masters and second moments), with no parameter or optimizer byte left on the
// device tier; also with sequence parallelism (bf16, host memory), and through the offload paths
// of a GPU job (TrainingExtras::host_staging: parameters and optimizer state staged between the
// device tier and the host as on a GPU; bf16, host memory and NVMe), which a GPU job with tp and
// pp takes.
struct CombinedCase {
  DType dtype;
  config::OffloadDevice device;
  bool sp = false;      // with sequence parallelism (both jobs)
  bool staged = false;  // the offloaded job through a GPU job's staging paths
};

class TensorPipelineCombined : public ::testing::TestWithParam<CombinedCase> {};

TEST_P(TensorPipelineCombined, OffloadAndMixedPrecisionTrainBitwiseLikeWithout) {
  const auto [dt, device, sp, staged] = GetParam();
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() % 4 != 0) GTEST_SKIP() << "tp 2 x pp 2 needs a multiple of 4 ranks";
  const auto c = gpt_3d();
  const int b = 2, m = 3, steps = 4, tp = 2, pp = 2, dp = w.size() / (tp * pp);
  train::TrainerOptions o = trainer_options(dt);
  config::Config base = job_config(o, b, m, 3, dt, 1000, true, /*checkpointing=*/true,
                                   /*act16=*/true);
  base.strata.tensor_parallel_size = tp;
  base.strata.pipeline_parallel_size = pp;
  base.strata.sequence_parallel = sp;
  offload::test::ScratchDir dir("tp_pp_offload");
  config::Config off = base;
  off.zero_optimization.offload_param.device = device;
  off.zero_optimization.offload_optimizer.device = device;
  if (device == config::OffloadDevice::nvme) {
    off.zero_optimization.offload_param.nvme_path = dir.str() + "/params";
    off.zero_optimization.offload_param.buffer_count = 2;
    off.zero_optimization.offload_optimizer.nvme_path = dir.str() + "/opt";
    off.zero_optimization.offload_optimizer.buffer_count = 2;
  }
  off.aio.block_size = 8192;
  MemoryLedger ledger;
  Replica ref(c, base, w);
  parallel::TrainingExtras extras = parallel::TrainingExtras::on(&ledger);
  extras.host_staging = staged;
  Replica x(c, off, w, std::move(extras));
  ASSERT_EQ(x.store.options().host_staging, staged);
  BatchFeed f0{dp, ref.training->grid().coords().dp, b, c.block_size, c.vocab_size}, f1 = f0;
  double first = 0, last = 0;
  for (int s = 0; s < steps; ++s) {
    const auto a = ref.engine.train_step(std::ref(f0));
    const auto y = x.engine.train_step(std::ref(f1));
    ASSERT_EQ(y.loss, a.loss) << "step " << s;
    ASSERT_EQ(y.result.grad_norm, a.result.grad_norm) << "step " << s;
    ASSERT_EQ(y.result.loss_scale, a.result.loss_scale) << "step " << s;
    EXPECT_EQ(ledger.current(Tier::device, Category::params), 0u) << "step " << s;
    EXPECT_EQ(ledger.current(Tier::device, Category::optimizer), 0u) << "step " << s;
    if (s == 0) first = a.loss;
    last = a.loss;
  }
  EXPECT_LT(last, first) << "the 3D job did not learn";
  EXPECT_TRUE(assemble_3d(*x.training, 0) == assemble_3d(*ref.training, 0)) << "masters differ";
  EXPECT_TRUE(assemble_3d(*x.training, 2) == assemble_3d(*ref.training, 2)) << "v differs";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TensorPipelineCombined,
    ::testing::Values(CombinedCase{DType::bf16, config::OffloadDevice::cpu},
                      CombinedCase{DType::bf16, config::OffloadDevice::nvme},
                      CombinedCase{DType::f16, config::OffloadDevice::cpu},
                      CombinedCase{DType::bf16, config::OffloadDevice::cpu, true},
                      CombinedCase{DType::bf16, config::OffloadDevice::cpu, true, true},
                      CombinedCase{DType::bf16, config::OffloadDevice::nvme, false, true}),
    [](const auto& i) {
      return std::string(dtype_name(i.param.dtype)) + "_" +
             std::string(config::to_string(i.param.device)) + (i.param.sp ? "_sp" : "") +
             (i.param.staged ? "_staged" : "");
    });

// The chain of layouts, on 8 ranks.
TEST(TensorPipelineCheckpoint, MovesAcrossDpTpPpAndZeroStages) {
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() != 8) GTEST_SKIP() << "the (dp 2, tp 2, pp 2) layout needs 8 ranks";
  SharedTempDir tmp(w, "ck3d");
  const auto c = gpt_3d();
  const std::string tokens = write_tokens(w, tmp.sub("train.tok"), c.vocab_size, 1601);
  const int global_rows = 8;
  struct Layout {
    int dp, tp, pp, zero;
  };
  auto spec = [&](const Layout& l) {
    JobSpec s;
    s.model = c;
    s.trainer.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3, .eps = 1e-6});
    s.tokens = tokens;
    s.tp = l.tp;
    s.pp = l.pp;
    s.stage = l.zero;
    s.micro = global_rows / l.dp;
    return s;
  };
  const parallel::Group self = w.split(w.rank(), 0, "self");
  auto group_of = [&](const Layout& l) -> const parallel::Group& {
    return l.dp * l.tp * l.pp == 1 ? self : w;
  };
  const std::vector<Layout> chain{{2, 2, 2, 3}, {4, 1, 2, 1}, {1, 1, 1, 0}, {2, 2, 2, 3}};
  std::map<std::string, std::vector<float>> master, m, v;
  double next_loss = 0;
  std::string from;  // the checkpoint the next layout loads
  for (std::size_t k = 0; k < chain.size(); ++k) {
    const Layout& l = chain[k];
    SCOPED_TRACE(fmt::format("layout {}: dp {} tp {} pp {} ZeRO {}", k, l.dp, l.tp, l.pp, l.zero));
    JobSpec s = spec(l);
    // One root per layout (the one-rank layout: per rank, each writes its own copy).
    s.ckpt.root = l.dp * l.tp * l.pp == 1 ? tmp.sub(fmt::format("ck{}_rank{}", k, w.rank()))
                                          : tmp.sub(fmt::format("ck{}", k));
    Job j(group_of(l), s);
    if (k == 0) {
      for (int i = 0; i < 3; ++i) j.train_step();
    } else {
      j.scramble();
      j.apply(j.ck->load(from));
      EXPECT_EQ(j.step, 3);
    }
    const auto mk = assemble_3d(*j.r->training, 0), mm = assemble_3d(*j.r->training, 1),
               mv = assemble_3d(*j.r->training, 2);
    if (k == 0) {
      master = mk;
      m = mm;
      v = mv;
    } else {
      EXPECT_TRUE(mk == master) << "masters differ";
      EXPECT_TRUE(mm == m) << "first moments differ";
      EXPECT_TRUE(mv == v) << "second moments differ";
    }
    j.save();
    j.ck->wait();
    from = checkpoint::join_path(s.ckpt.root, checkpoint::step_dir_name(3));
    if (l.dp * l.tp * l.pp == 1)  // every rank loads rank 0's copy next
      from = checkpoint::join_path(tmp.sub("ck2_rank0"), checkpoint::step_dir_name(3));
    const double loss = j.train_step();
    if (k == 0) {
      next_loss = loss;
    } else {
      EXPECT_LT(std::abs(loss - next_loss) / next_loss, 1e-6) << loss << " vs " << next_loss;
    }
  }
}

}  // namespace test_tensor_pipeline
}  // namespace
