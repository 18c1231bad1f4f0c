// Optimizer offload under data parallelism: with the optimizer state on the host ("cpu") or in
// per-rank NVMe swap files ("nvme"), ZeRO stages 2 and 3 train bitwise the same model as with the
// state on the device (losses and weights, f32 and bf16); and with a device cap below the model
// states, training fails without offload (OutOfMemory whose advice names offload) and trains
// with it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>

#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/size.hpp"
#include "offload/factory.hpp"
#include "offload/nvme_state_store.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/unit/offload/offload_test_util.hpp"
#include "tests/dist/engine/zero_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_offload {  // file-local names, unique in a unity build

using config::OffloadDevice;


config::Config offload_config(OffloadDevice d, int stage, const std::string& dir) {
  config::Config c;
  c.zero_optimization.stage = stage;
  auto& o = c.zero_optimization.offload_optimizer;
  o.device = d;
  if (d == OffloadDevice::nvme) {
    o.nvme_path = dir;
    o.buffer_count = 2;  // fewer buffers than the tiny GPT's 4 units: real swapping
  }
  c.aio.block_size = 8192;
  c.aio.queue_depth = 4;
  return c;
}

// The test job's config with the offload settings (offload_optimizer, aio) of `off`.
config::Config offloaded(const train::TrainerOptions& o, int micro, int accum, int stage, DType dt,
                         const config::Config& off) {
  config::Config cfg = job_config(o, micro, accum, stage, dt);
  cfg.zero_optimization.offload_optimizer = off.zero_optimization.offload_optimizer;
  cfg.aio = off.aio;
  return cfg;
}

struct Case {
  int stage;
  DType dtype;
};

class OffloadEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(OffloadEquivalence, CpuAndNvmeTrainBitwiseLikeNoOffload) {
  const auto [stage, dt] = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, accum = 1, steps = 10;
  const auto c = tiny_gpt();
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
  o.max_grad_norm = 1.0;
  o.precision = dt == DType::bf16 ? train::Precision::bf16 : train::Precision::f32;
  offload::test::ScratchDir dir("dist");
  Replica none(c, offloaded(o, b, accum, stage, dt, offload_config(OffloadDevice::none, stage, "")), w);
  Replica cpu(c, offloaded(o, b, accum, stage, dt, offload_config(OffloadDevice::cpu, stage, "")), w);
  Replica nvme(c, offloaded(o, b, accum, stage, dt, offload_config(OffloadDevice::nvme, stage, dir.str())), w);
  BatchFeed f0{N, w.rank(), b, c.block_size, c.vocab_size}, f1 = f0, f2 = f0;
  for (int s = 0; s < steps; ++s) {
    const auto a = none.engine.train_step(std::ref(f0));
    const auto h = cpu.engine.train_step(std::ref(f1));
    const auto n = nvme.engine.train_step(std::ref(f2));
    ASSERT_EQ(h.loss, a.loss) << "cpu offload, step " << s;
    ASSERT_EQ(n.loss, a.loss) << "nvme offload, step " << s;
    ASSERT_EQ(h.result.grad_norm, a.result.grad_norm) << "step " << s;
    ASSERT_EQ(n.result.grad_norm, a.result.grad_norm) << "step " << s;
  }
  const auto w0 = none.master_weights();
  EXPECT_EQ(cpu.master_weights(), w0);
  EXPECT_EQ(nvme.master_weights(), w0);
  EXPECT_EQ(cpu.value_shards(), none.value_shards());
  EXPECT_EQ(nvme.value_shards(), none.value_shards());
  auto* store = dynamic_cast<offload::NvmeStateStore*>(&nvme.trainer.states());
  ASSERT_NE(store, nullptr);
  const auto st = store->swapper().stats();
  EXPECT_GT(st.bytes_read, 0u);  // the state really went through the swap file
  EXPECT_GT(st.bytes_written, 0u);
  if (w.rank() == 0)
    std::printf("np=%d stage %d %s: none/cpu/nvme bitwise over %d steps; nvme moved %s in, %s out\n",
                N, stage, std::string(dtype_name(dt)).c_str(), steps,
                format_bytes(st.bytes_read).c_str(), format_bytes(st.bytes_written).c_str());
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return "stage" + std::to_string(i.param.stage) + "_" + std::string(dtype_name(i.param.dtype));
}

INSTANTIATE_TEST_SUITE_P(Stages, OffloadEquivalence,
                         ::testing::Values(Case{2, DType::f32}, Case{3, DType::f32},
                                           Case{2, DType::bf16}, Case{3, DType::bf16}),
                         case_name);

// Resident optimizer bytes of a replica's owned slices (f32 master for 16-bit parameters, m, v).
double resident_optimizer_bytes(const nn::ParamStore& s, bool master) {
  double b = 0;
  for (std::size_t u = 0; u < s.num_units(); ++u)
    b += static_cast<double>(s.layout(u).hi - s.layout(u).lo) * 4 * (master ? 3 : 2);
  return b;
}

class OffloadUnderDeviceCap : public ::testing::TestWithParam<OffloadDevice> {};

// Phase 2 unwinds a half-built replica (OutOfMemory in the Trainer's constructor). Tearing the
// NVMe tier down with transfers in flight is covered on its own by tests/unit/offload/
// test_teardown.cpp; here the config the replicas were built from must still be intact after
// every phase (it was once reported overwritten while this test ran).
TEST_P(OffloadUnderDeviceCap, FailsWithoutOffloadAndTrainsWithIt) {
  // One rank per process (every rank runs it on its own group): the laptop case. On N ranks the
  // optimizer's share shrinks to 12Ψ/N while stage 2's transient gradient buffers do not, so a cap
  // between "fits with offload" and "fits without" exists only for small N.
  const OffloadDevice dev = GetParam();
  const auto& w = world();
  const parallel::Group self = w.split(w.rank(), 0, "self");
  const int N = 1, b = 2, accum = 1, stage = 2;
  const DType dt = DType::bf16;
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 4;  // optimizer state (12 B/param) well above the transient peak
  c.n_head = 4;
  c.n_embd = 128;
  train::TrainerOptions o;
  o.precision = train::Precision::bf16;
  offload::test::ScratchDir dir("dist");
  const auto cfg = offload_config(dev, stage, dir.str());
  const auto expect_config_intact = [&](const char* when) {
    EXPECT_EQ(cfg.zero_optimization.offload_optimizer.device, dev) << when;
    EXPECT_EQ(cfg.zero_optimization.offload_param.device, OffloadDevice::none) << when;
    EXPECT_EQ(cfg.zero_optimization.stage, stage) << when;
    EXPECT_EQ(cfg.aio.block_size, 8192) << when;
  };
  // 1. Device peak of the offloaded run, uncapped.
  std::uint64_t peak_off = 0;
  double opt_bytes = 0, at_init_resident = 0;
  std::vector<double> losses;
  {
    MemoryLedger ledger;
    Replica r(c, offloaded(o, b, accum, stage, dt, cfg), self, parallel::TrainingExtras::on(&ledger));
    EXPECT_EQ(ledger.current(Tier::device, Category::optimizer), 0u);
    EXPECT_GT(ledger.current(dev == OffloadDevice::cpu ? Tier::host : Tier::nvme, Category::optimizer), 0u);
    opt_bytes = resident_optimizer_bytes(r.store, true);
    at_init_resident = static_cast<double>(ledger.current(Tier::device)) + opt_bytes;
    BatchFeed f{N, 0, b, c.block_size, c.vocab_size};
    for (int s = 0; s < 3; ++s) losses.push_back(r.engine.train_step(std::ref(f)).loss);
    peak_off = ledger.peak(Tier::device);
  }
  expect_config_intact("after the uncapped run");
  // 2. A cap that fits the offloaded run but not the model states with the optimizer resident:
  // half-way between the two, as transient peaks vary a little with the timing of collectives.
  ASSERT_GT(at_init_resident, 1.25 * static_cast<double>(peak_off))
      << "test setup: the optimizer state must not fit beside the offloaded run's peak";
  const auto cap = static_cast<std::uint64_t>((at_init_resident + static_cast<double>(peak_off)) / 2);
  {
    MemoryLedger ledger;
    ledger.set_cap(Tier::device, cap);
    try {
      Replica r(c, offloaded(o, b, accum, stage, dt, offload_config(OffloadDevice::none, stage, "")), self, parallel::TrainingExtras::on(&ledger));
      ADD_FAILURE() << "model states fit under a " << format_bytes(cap) << " device cap without offload";
    } catch (const OutOfMemory& e) {
      bool names_offload = false;
      for (const auto& a : e.advice()) names_offload = names_offload || a.find("offload_optimizer") != std::string::npos;
      EXPECT_TRUE(names_offload) << e.what();
      EXPECT_EQ(e.context().tier, Tier::device);
    }
  }
  expect_config_intact("after the replica that ran out of memory was unwound");
  // 3. The same cap with offload: trains, same losses as uncapped.
  {
    MemoryLedger ledger;
    ledger.set_cap(Tier::device, cap);
    Replica r(c, offloaded(o, b, accum, stage, dt, cfg), self, parallel::TrainingExtras::on(&ledger));
    BatchFeed f{N, 0, b, c.block_size, c.vocab_size};
    for (int s = 0; s < 3; ++s) EXPECT_EQ(r.engine.train_step(std::ref(f)).loss, losses[static_cast<std::size_t>(s)]);
    EXPECT_LE(ledger.peak(Tier::device), cap);
    expect_config_intact("after the capped run");
    if (w.rank() == 0)
      std::printf("rank 0 of %d, alone: offload %s: device cap %s (model states with resident optimizer %s) — "
                  "trains; memory:\n%s",
                  w.size(), std::string(config::to_string(dev)).c_str(), format_bytes(cap).c_str(),
                  format_bytes(static_cast<std::uint64_t>(at_init_resident)).c_str(),
                  ledger.report().c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, OffloadUnderDeviceCap,
                         ::testing::Values(OffloadDevice::cpu, OffloadDevice::nvme),
                         [](const auto& i) { return std::string(config::to_string(i.param)); });

}  // namespace test_offload
}  // namespace
