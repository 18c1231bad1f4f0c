// Gradient offload (implied by offload_optimizer "cpu" / "nvme"): each unit's gradients leave the
// device right after its backward (and reduction), into host memory or a per-rank "grads" swap
// file, and accumulate there over micro-batches. Checked at ZeRO 1, 2 and 3, with accumulation:
// losses, gradient norms and weights bitwise those of the run with everything on the device; the
// device holds no gradient bytes between steps and at most the in-flight window during backward,
// under a device cap that the whole model's gradients would exceed; N ranks match one rank.
#include <gtest/gtest.h>

#include <memory>

#include "framework/memory/size.hpp"
#include "offload/value_shard_store.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/grad_sizes.hpp"
#include "tests/dist/engine/zero_fixture.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

using namespace strata;
using namespace strata::test;

namespace {

using config::OffloadDevice;

config::Config with_offload(config::Config cfg, OffloadDevice d, const std::string& dir) {
  auto& o = cfg.zero_optimization.offload_optimizer;
  o.device = d;
  if (d == OffloadDevice::nvme) {
    o.nvme_path = dir;
    o.buffer_count = 2;  // fewer buffers than units: real swapping of gradients and state
  }
  cfg.aio.block_size = 8192;
  cfg.aio.queue_depth = 4;
  return cfg;
}

using test_util::GradSizes;
// The device's gradient window: the unit being computed, the previous unit's reduction in flight,
// unit 0, plus slack of three units for the transport's late release of completed collectives
// (test_zero_grad_window.cpp).
constexpr int kWindowUnits = 5;

struct Case {
  int stage;
  int accum;
  DType dtype;
  bool overlap = true;
};

class GradOffload : public ::testing::TestWithParam<Case> {};

TEST_P(GradOffload, BitwiseLikeOnDeviceAndDeviceHoldsOnlyTheWindow) {
  const auto [stage, accum, dt, overlap] = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, steps = 6;
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 20;  // many units: the whole model's gradients are far above the window
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
  o.max_grad_norm = 1.0;
  o.precision = dt == DType::bf16 ? train::Precision::bf16 : train::Precision::f32;
  offload::test::ScratchDir dir("gradoff");
  const config::Config base = job_config(o, b, accum, stage, dt, 1000, overlap);
  MemoryLedger l_none, l_cpu, l_nvme;
  Replica none(c, base, w, parallel::TrainingExtras::on(&l_none));
  Replica cpu(c, with_offload(base, OffloadDevice::cpu, ""), w, parallel::TrainingExtras::on(&l_cpu));
  Replica nvme(c, with_offload(base, OffloadDevice::nvme, dir.str()), w,
               parallel::TrainingExtras::on(&l_nvme));
  ASSERT_TRUE(cpu.store.grads_offloaded());
  ASSERT_TRUE(nvme.store.grads_offloaded());
  const GradSizes sz(none.store);
  ASSERT_GT(sz.all, 1.5 * sz.window(kWindowUnits)) << "test setup: the window must be well below the model";
  BatchFeed f0{N, w.rank(), b, c.block_size, c.vocab_size}, f1 = f0, f2 = f0;
  for (int s = 0; s < steps; ++s) {
    l_cpu.reset_peaks();
    l_nvme.reset_peaks();
    const auto a = none.engine.train_step(std::ref(f0));
    const auto h = cpu.engine.train_step(std::ref(f1));
    const auto n = nvme.engine.train_step(std::ref(f2));
    ASSERT_EQ(h.loss, a.loss) << "cpu, step " << s;
    ASSERT_EQ(n.loss, a.loss) << "nvme, step " << s;
    ASSERT_EQ(h.result.grad_norm, a.result.grad_norm) << "cpu, step " << s;
    ASSERT_EQ(n.result.grad_norm, a.result.grad_norm) << "nvme, step " << s;
    for (auto* l : {&l_cpu, &l_nvme}) {
      EXPECT_EQ(l->current(Tier::device, Category::grads), 0u) << "step " << s;
      EXPECT_LE(static_cast<double>(l->peak(Tier::device, Category::grads)), sz.window(kWindowUnits))
          << "step " << s << ": more than the in-flight window on the device (whole model "
          << format_bytes(static_cast<std::uint64_t>(sz.all)) << ")";
      EXPECT_GT(l->peak(Tier::device, Category::grads), 0u);
    }
  }
  EXPECT_GT(l_cpu.current(Tier::host, Category::grads), 0u);
  EXPECT_GT(l_nvme.current(Tier::nvme, Category::grads), 0u);
  EXPECT_GT(l_none.current(Tier::device, Category::grads), 0u);
  const auto w0 = none.master_weights();
  EXPECT_EQ(cpu.master_weights(), w0);
  EXPECT_EQ(nvme.master_weights(), w0);
  EXPECT_EQ(cpu.value_shards(), none.value_shards());
  EXPECT_EQ(nvme.value_shards(), none.value_shards());
  auto* gs = dynamic_cast<offload::NvmeValueShardStore*>(nvme.store.options().grad_store.get());
  ASSERT_NE(gs, nullptr);
  const auto st = gs->swapper().stats();
  EXPECT_GT(st.bytes_written, 0u);  // the gradients really went through the swap file
  EXPECT_GT(st.bytes_read, 0u);
  if (accum == 1) {
    // Each step reads each gradient slice once, for the update: the norm took its share where
    // the reduction wrote the slice (Trainer::note_final_gradient) instead of a second pass.
    std::uint64_t pass = 0;
    for (std::size_t u = 0; u < nvme.store.num_units(); ++u) {
      const auto& l = nvme.store.layout(u);  // (stage 1 stores whole units: ParamStore)
      const std::int64_t stored = nvme.store.options().shard_grads ? l.hi - l.lo : l.padded;
      pass += offload::round_up_io(static_cast<std::uint64_t>(stored) * dtype_size(dt));
    }
    EXPECT_LE(st.bytes_read, steps * pass) << "the gradient norm read the offloaded gradients again";
  }
  if (w.rank() == 0)
    std::printf("np=%d stage %d accum %d %s%s: none/cpu/nvme bitwise over %d steps; device grads "
                "peak %s (cpu) %s (nvme), window %s, whole model %s; grads swap %s in, %s out\n",
                N, stage, accum, std::string(dtype_name(dt)).c_str(), overlap ? "" : " no-overlap",
                steps, format_bytes(l_cpu.peak(Tier::device, Category::grads)).c_str(),
                format_bytes(l_nvme.peak(Tier::device, Category::grads)).c_str(),
                format_bytes(static_cast<std::uint64_t>(sz.window(kWindowUnits))).c_str(),
                format_bytes(static_cast<std::uint64_t>(sz.all)).c_str(),
                format_bytes(st.bytes_read).c_str(), format_bytes(st.bytes_written).c_str());
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return "stage" + std::to_string(i.param.stage) + "_accum" + std::to_string(i.param.accum) + "_" +
         std::string(dtype_name(i.param.dtype)) + (i.param.overlap ? "" : "_nooverlap");
}

INSTANTIATE_TEST_SUITE_P(Stages, GradOffload,
                         ::testing::Values(Case{1, 1, DType::f32}, Case{1, 3, DType::bf16},
                                           Case{2, 1, DType::bf16}, Case{2, 3, DType::f32},
                                           Case{3, 2, DType::bf16}, Case{2, 2, DType::f32, false},
                                           Case{1, 2, DType::f32, false}),
                         case_name);

// N ranks with gradients (and optimizer state) on NVMe train like one rank with N times the
// micro-batch (data parallelism's usual tolerance: reductions sum in another order; at np 1 the
// two runs are the same job, bitwise).
TEST(GradOffloadRanks, NRanksMatchOneRank) {
  const auto& w = world();
  const int N = w.size(), b = 2, accum = 2, steps = 6;
  const auto c = tiny_gpt();
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
  o.max_grad_norm = 0.5;
  // Two directories: rank 0's swap files of both jobs would have the same names.
  offload::test::ScratchDir dir_dp("gradoff_np"), dir_ref("gradoff_ref");
  for (int stage : {1, 2, 3}) {
    Replica dp(c, with_offload(job_config(o, b, accum, stage), OffloadDevice::nvme, dir_dp.str()), w);
    Replica ref(c, with_offload(job_config(o, N * b, accum, stage), OffloadDevice::nvme, dir_ref.str()),
                w.split(w.rank(), 0, "self"));
    BatchFeed dp_feed{N, w.rank(), b, c.block_size, c.vocab_size};
    BatchFeed ref_feed{1, 0, N * b, c.block_size, c.vocab_size};
    for (int s = 0; s < steps; ++s) {
      const auto a = dp.engine.train_step(std::ref(dp_feed));
      const auto r = ref.engine.train_step(std::ref(ref_feed));
      EXPECT_NEAR(a.loss, r.loss, 1e-6 * r.loss) << "stage " << stage << ", step " << s;
      EXPECT_NEAR(a.result.grad_norm, r.result.grad_norm, 1e-5 * r.result.grad_norm)
          << "stage " << stage << ", step " << s;
    }
    // AdamW turns round-off of near-zero gradients into O(lr) weight differences: the bound of
    // test_dp_equivalence.cpp (relative L2 5e-6).
    EXPECT_LT(rel_l2(dp.master_weights(), ref.master_weights()), 5e-6) << "stage " << stage;
  }
}

// A device cap below the whole model's gradients: with the parameters, the optimizer state and
// the gradients all on NVMe (ZeRO-3, the big run's set-up) the job trains under it, with the
// losses of the uncapped run.
TEST(GradOffloadCap, TrainsUnderACapTheWholeModelsGradientsExceed) {
  const auto& w = world();
  const parallel::Group self = w.split(w.rank(), 0, "self");
  const int b = 2, accum = 2, stage = 3;
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 20;
  train::TrainerOptions o;
  offload::test::ScratchDir dir("gradoff_cap");
  config::Config cfg = with_offload(job_config(o, b, accum, stage), OffloadDevice::nvme, dir.str());
  cfg.zero_optimization.offload_param.device = OffloadDevice::nvme;
  cfg.zero_optimization.offload_param.nvme_path = dir.str();
  std::vector<double> losses;
  std::uint64_t peak = 0;
  double all_grads = 0;
  {
    MemoryLedger ledger;
    Replica r(c, cfg, self, parallel::TrainingExtras::on(&ledger));
    all_grads = GradSizes(r.store).all;
    BatchFeed f{1, 0, b, c.block_size, c.vocab_size};
    for (int s = 0; s < 3; ++s) losses.push_back(r.engine.train_step(std::ref(f)).loss);
    peak = ledger.peak(Tier::device);
  }
  const std::uint64_t cap = peak + peak / 10;
  ASSERT_GT(all_grads, static_cast<double>(cap))
      << "test setup: the whole model's gradients must not fit under the cap";
  MemoryLedger ledger;
  ledger.set_cap(Tier::device, cap);
  Replica r(c, cfg, self, parallel::TrainingExtras::on(&ledger));
  BatchFeed f{1, 0, b, c.block_size, c.vocab_size};
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(r.engine.train_step(std::ref(f)).loss, losses[static_cast<std::size_t>(s)]);
  EXPECT_LE(ledger.peak(Tier::device), cap);
  if (w.rank() == 0)
    std::printf("device cap %s, whole model's gradients %s: trains; memory:\n%s",
                format_bytes(cap).c_str(), format_bytes(static_cast<std::uint64_t>(all_grads)).c_str(),
                ledger.report().c_str());
}

}  // namespace
