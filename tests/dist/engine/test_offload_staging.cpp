// Offload from a GPU, run on the CPU: with TrainingExtras::host_staging the engine takes the paths
// of a GPU job with offload (nn::ParamStoreOptions::host_staging) — reduced gradients go to the
// gradient store by copies that land one hook later, accumulated micro-batches come back up and
// are added on the device tier, value slices reach the optimizer through pinned staging buffers
// and go back by copies, offloaded parameter slices go up before their gathers — with the CPU's
// immediate copies in place of a GPU's streams. Checked: losses, gradient norms, masters and
// value slices bitwise those of the run with everything on the device (ZeRO 1-3, accumulation,
// f32 and bf16, host and NVMe, parameters offloaded with and without the optimizer state, every
// optimizer that runs with offload), the device holding no gradients between steps and at most
// the staged in-flight window during backward, and N ranks like one rank.
#include <gtest/gtest.h>

#include <memory>

#include "framework/memory/size.hpp"
#include "framework/optim/optimizers/adafactor.hpp"
#include "framework/optim/optimizers/adamw8bit.hpp"
#include "framework/optim/optimizers/lamb.hpp"
#include "framework/optim/optimizers/lion.hpp"
#include "offload/value_shard_store.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/grad_sizes.hpp"
#include "tests/dist/engine/test_resume_fixture.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_offload_staging {  // file-local names, unique in a unity build

using config::OffloadDevice;

config::Config with_offload(config::Config cfg, OffloadDevice optimizer, OffloadDevice param,
                            const std::string& dir) {
  auto& z = cfg.zero_optimization;
  z.offload_optimizer.device = optimizer;
  z.offload_param.device = param;
  for (auto* nvme_path : {&z.offload_optimizer.nvme_path, &z.offload_param.nvme_path}) *nvme_path = dir;
  z.offload_optimizer.buffer_count = 2;  // fewer buffers than units: real swapping
  z.offload_param.buffer_count = 3;
  cfg.aio.block_size = 8192;
  cfg.aio.queue_depth = 4;
  return cfg;
}

parallel::TrainingExtras staged(MemoryLedger* l) {
  parallel::TrainingExtras e = parallel::TrainingExtras::on(l);
  e.host_staging = true;
  return e;
}

using test_util::GradSizes;
// The device's gradient window: the unit being computed, the previous one's reduction, the one
// before landing in host memory (and, accumulating, the stored slice come up beside it), unit 0
// (open through backward), and the same slack as without staging for the transport's late release
// (test_grad_offload.cpp).
constexpr int kWindowUnits = 7;

struct Case {
  int stage;
  int accum;
  DType dtype;
  bool overlap = true;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return "stage" + std::to_string(i.param.stage) + "_accum" + std::to_string(i.param.accum) + "_" +
         std::string(dtype_name(i.param.dtype)) + (i.param.overlap ? "" : "_nooverlap");
}

class StagedOffload : public ::testing::TestWithParam<Case> {};

TEST_P(StagedOffload, BitwiseLikeOnDeviceAndDeviceHoldsOnlyTheWindow) {
  const auto [stage, accum, dt, overlap] = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, steps = 4;
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 20;  // many units: the whole model's gradients are far above the window
  train::TrainerOptions o = trainer_options(dt);  // AdamW, clipping at 1.0
  offload::test::ScratchDir dir("staged");
  const config::Config base = job_config(o, b, accum, stage, dt, 1000, overlap);
  MemoryLedger l_none, l_cpu, l_nvme;
  Replica none(c, base, w, parallel::TrainingExtras::on(&l_none));
  Replica cpu(c, with_offload(base, OffloadDevice::cpu, OffloadDevice::none, ""), w, staged(&l_cpu));
  Replica nvme(c, with_offload(base, OffloadDevice::nvme, OffloadDevice::none, dir.str()), w,
               staged(&l_nvme));
  ASSERT_TRUE(cpu.store.options().host_staging && cpu.store.grads_offloaded());
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
          << "step " << s << ": more than the staged window on the device (whole model "
          << format_bytes(static_cast<std::uint64_t>(sz.all)) << ")";
      // The update's values went through the pinned staging buffers.
      EXPECT_GT(l->peak(Tier::host, Category::params), 0u) << "step " << s;
    }
  }
  EXPECT_GT(l_cpu.current(Tier::host, Category::grads), 0u);
  EXPECT_EQ(l_cpu.current(Tier::device, Category::optimizer), 0u);
  const auto w0 = none.master_weights();
  EXPECT_EQ(cpu.master_weights(), w0);
  EXPECT_EQ(nvme.master_weights(), w0);
  EXPECT_EQ(cpu.value_shards(), none.value_shards());
  EXPECT_EQ(nvme.value_shards(), none.value_shards());
  if (w.rank() == 0)
    std::printf("np=%d stage %d accum %d %s%s staged: none/cpu/nvme bitwise over %d steps; device "
                "grads peak %s (cpu) %s (nvme), window %s, whole model %s\n",
                N, stage, accum, std::string(dtype_name(dt)).c_str(), overlap ? "" : " no-overlap",
                steps, format_bytes(l_cpu.peak(Tier::device, Category::grads)).c_str(),
                format_bytes(l_nvme.peak(Tier::device, Category::grads)).c_str(),
                format_bytes(static_cast<std::uint64_t>(sz.window(kWindowUnits))).c_str(),
                format_bytes(static_cast<std::uint64_t>(sz.all)).c_str());
}

INSTANTIATE_TEST_SUITE_P(Stages, StagedOffload,
                         ::testing::Values(Case{1, 1, DType::f32}, Case{1, 3, DType::bf16},
                                           Case{2, 1, DType::bf16}, Case{2, 3, DType::f32},
                                           Case{3, 1, DType::f32}, Case{3, 2, DType::bf16},
                                           Case{2, 2, DType::bf16, false},
                                           Case{1, 2, DType::f32, false}),
                         case_name);

// ZeRO-3 parameter slices in host memory or on NVMe, going up before each gather, with the
// optimizer state on the host too or beside the parameters on the device (its update then runs
// on the device and the updated slice goes down): bitwise the run with everything on the device.
TEST(StagedOffload, ParameterSlicesBitwiseLikeOnDevice) {
  const auto& w = world();
  const int N = w.size(), b = 2, steps = 3;
  const nn::GptConfig c = tiny_gpt();
  for (const DType dt : {DType::f32, DType::bf16}) {
    for (const OffloadDevice param : {OffloadDevice::cpu, OffloadDevice::nvme}) {
      for (const OffloadDevice opt : {OffloadDevice::none, OffloadDevice::cpu}) {
        offload::test::ScratchDir dir("staged-param");
        const config::Config base = job_config(trainer_options(dt), b, 2, 3, dt);
        MemoryLedger l_none, l_off;
        Replica none(c, base, w, parallel::TrainingExtras::on(&l_none));
        Replica off(c, with_offload(base, opt, param, dir.str()), w, staged(&l_off));
        BatchFeed f0{N, w.rank(), b, c.block_size, c.vocab_size}, f1 = f0;
        const std::string what = fmt::format("{} params {} optimizer {}", dtype_name(dt),
                                             config::to_string(param), config::to_string(opt));
        for (int s = 0; s < steps; ++s) {
          const auto a = none.engine.train_step(std::ref(f0));
          const auto h = off.engine.train_step(std::ref(f1));
          ASSERT_EQ(h.loss, a.loss) << what << ", step " << s;
          ASSERT_EQ(h.result.grad_norm, a.result.grad_norm) << what << ", step " << s;
          EXPECT_EQ(l_off.current(Tier::device, Category::params), 0u) << what;
        }
        EXPECT_EQ(off.master_weights(), none.master_weights()) << what;
        EXPECT_EQ(off.value_shards(), none.value_shards()) << what;
      }
    }
  }
}

// Every optimizer that runs with offload, its update on the host through the staging buffers:
// bitwise the same optimizer with its state beside the parameters (on the CPU both run its host
// kernels; on a GPU those without CUDA kernels run only so).
TEST(StagedOffload, EveryOptimizerBitwiseLikeOnDevice) {
  const auto& w = world();
  const int N = w.size(), b = 2, steps = 3;
  const nn::GptConfig c = tiny_gpt();
  auto with = [](std::shared_ptr<const optim::Optimizer> opt, DType dt) {
    train::TrainerOptions o = trainer_options(dt);
    o.optimizer = std::move(opt);
    return o;
  };
  const optim::AdamWHyper adamw{.lr = 3e-3};
  optim::AdafactorHyper af;
  af.relative_step = false;
  af.scale_parameter = false;
  af.lr = 3e-3;
  af.eps1 = 1e-16;
  const std::vector<std::shared_ptr<const optim::Optimizer>> optimizers = {
      std::make_shared<optim::AdamW8bit>(adamw), std::make_shared<optim::Adafactor>(af),
      std::make_shared<optim::Lamb>(optim::LambHyper{.lr = 3e-2, .weight_decay = 0.01, .min_coeff = 0.1}),
      std::make_shared<optim::Lion>(optim::LionHyper{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99,
                                                     .weight_decay = 0.01})};
  for (const auto& opt : optimizers) {
    for (const DType dt : {DType::f32, DType::bf16}) {
      const config::Config base = job_config(with(opt, dt), b, 1, 2, dt);
      Replica none(c, base, w);
      MemoryLedger l;
      Replica off(c, with_offload(base, OffloadDevice::cpu, OffloadDevice::none, ""), w, staged(&l));
      BatchFeed f0{N, w.rank(), b, c.block_size, c.vocab_size}, f1 = f0;
      const std::string what = fmt::format("{} {}", opt->name(), dtype_name(dt));
      for (int s = 0; s < steps; ++s) {
        const auto a = none.engine.train_step(std::ref(f0));
        const auto h = off.engine.train_step(std::ref(f1));
        ASSERT_EQ(h.loss, a.loss) << what << ", step " << s;
        ASSERT_EQ(h.result.grad_norm, a.result.grad_norm) << what << ", step " << s;
      }
      EXPECT_EQ(off.master_weights(), none.master_weights()) << what;
      EXPECT_EQ(off.value_shards(), none.value_shards()) << what;
      EXPECT_GT(l.peak(Tier::host, Category::params), 0u) << what << ": no staging buffer";
    }
  }
}

// N ranks with staged offload train like one rank with the whole batch (the tests above compare
// each world size with itself).
TEST(StagedOffload, NRanksLikeOneRank) {
  const auto& w = world();
  const int N = w.size(), b = 2, steps = 3;
  const nn::GptConfig c = tiny_gpt();
  for (const int stage : {1, 2, 3}) {
    MemoryLedger l0, l1;
    const config::Config cfg = with_offload(job_config(trainer_options(DType::f32), b, 2, stage),
                                            OffloadDevice::cpu, OffloadDevice::none, "");
    const config::Config ref_cfg = with_offload(job_config(trainer_options(DType::f32), N * b, 2, stage),
                                                OffloadDevice::cpu, OffloadDevice::none, "");
    Replica dp(c, cfg, w, staged(&l0));
    Replica ref(c, ref_cfg, w.split(w.rank(), 0, "self"), staged(&l1));
    BatchFeed feed{N, w.rank(), b, c.block_size, c.vocab_size};
    BatchFeed ref_feed{1, 0, N * b, c.block_size, c.vocab_size};
    for (int s = 0; s < steps; ++s) {
      const auto a = dp.engine.train_step(std::ref(feed));
      const auto e = ref.engine.train_step(std::ref(ref_feed));
      EXPECT_NEAR(a.loss, e.loss, 1e-6 * e.loss) << "stage " << stage << ", step " << s;
    }
    EXPECT_LT(rel_l2(dp.master_weights(), ref.master_weights()), 1e-5) << "stage " << stage;
  }
}

// What a GPU job with offload refuses stays one line naming the key.
TEST(StagedOffload, UpdatesInBackwardAreRefused) {
  const auto& w = world();
  train::TrainerOptions o = trainer_options(DType::f32);
  o.max_grad_norm = 0;
  o.step_in_backward = true;
  const config::Config cfg = with_offload(job_config(o, 2, 1, 2), OffloadDevice::cpu,
                                          OffloadDevice::none, "");
  MemoryLedger l;
  try {
    Replica r(tiny_gpt(), cfg, w, staged(&l));
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("strata.optimizer_in_backward"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace test_offload_staging
}  // namespace
