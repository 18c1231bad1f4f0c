// Parameter offload (offload_param, ZeRO-3): with the owned parameter slices on the host ("cpu")
// or in per-rank NVMe swap files ("nvme") — alone or together with optimizer offload — training
// is bitwise the same as with the slices on the device (losses, gradient norms, master weights
// and parameter values, f32 and bf16, on every rank count the suite runs), and between steps the
// device holds no parameters at all. A device cap below the parameter slices fails without
// offload_param (OutOfMemory whose advice names offload_param) and trains with it; an I/O error
// in the params swap file is raised with the file's name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/size.hpp"
#include "offload/factory.hpp"
#include "offload/nvme_state_store.hpp"
#include "offload/value_shard_store.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/unit/offload/offload_test_util.hpp"
#include "tests/dist/engine/zero_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_offload_param {  // file-local names, unique in a unity build

using config::OffloadDevice;


config::Config param_config(OffloadDevice param, OffloadDevice opt, const std::string& dir) {
  config::Config c;
  c.zero_optimization.stage = 3;
  auto& p = c.zero_optimization.offload_param;
  p.device = param;
  if (param == OffloadDevice::nvme) {
    p.nvme_path = dir + "/params";
    p.buffer_count = 3;  // fewer than the tiny GPT's 4 units: real swapping
  }
  auto& o = c.zero_optimization.offload_optimizer;
  o.device = opt;
  if (opt == OffloadDevice::nvme) {
    o.nvme_path = dir + "/optimizer";
    o.buffer_count = 2;
  }
  c.aio.block_size = 8192;
  return c;
}

// The test job at ZeRO stage 3 with the offload settings (offload_param, offload_optimizer, aio)
// of `off`.
config::Config offloaded(const train::TrainerOptions& o, int micro, DType dt,
                         const config::Config& off) {
  config::Config cfg = job_config(o, micro, 1, 3, dt);
  cfg.zero_optimization.offload_param = off.zero_optimization.offload_param;
  cfg.zero_optimization.offload_optimizer = off.zero_optimization.offload_optimizer;
  cfg.aio = off.aio;
  return cfg;
}

offload::NvmeValueShardStore* nvme_values(Replica& r) {
  return dynamic_cast<offload::NvmeValueShardStore*>(r.store.options().value_store.get());
}

train::TrainerOptions trainer_options(DType dt) {
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
  o.max_grad_norm = 1.0;
  o.precision = dt == DType::bf16 ? train::Precision::bf16 : train::Precision::f32;
  return o;
}

struct Case {
  DType dtype;
  OffloadDevice param, opt;
};

class ParamOffload : public ::testing::TestWithParam<Case> {};

TEST_P(ParamOffload, TrainsBitwiseLikeSlicesOnTheDevice) {
  const auto [dt, param, opt] = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, steps = 10;
  const auto c = tiny_gpt();
  const auto o = trainer_options(dt);
  offload::test::ScratchDir dir("param");
  const std::string d = dir.str();
  MemoryLedger ledger;
  Replica ref(c, offloaded(o, b, dt, param_config(OffloadDevice::none, OffloadDevice::none, d)), w);
  Replica off(c, offloaded(o, b, dt, param_config(param, opt, d)), w, parallel::TrainingExtras::on(&ledger));
  BatchFeed f0{N, w.rank(), b, c.block_size, c.vocab_size}, f1 = f0;
  for (int s = 0; s < steps; ++s) {
    const auto a = ref.engine.train_step(std::ref(f0));
    const auto x = off.engine.train_step(std::ref(f1));
    ASSERT_EQ(x.loss, a.loss) << "step " << s;
    ASSERT_EQ(x.result.grad_norm, a.result.grad_norm) << "step " << s;
    // Between steps the device holds no parameters: every slice is on the host / NVMe.
    EXPECT_EQ(ledger.current(Tier::device, Category::params), 0u) << "step " << s;
  }
  EXPECT_EQ(off.master_weights(), ref.master_weights());
  EXPECT_EQ(off.value_shards(), ref.value_shards());
  const Tier where = param == OffloadDevice::cpu ? Tier::host : Tier::nvme;
  EXPECT_GT(ledger.current(where, Category::params), 0u);
  EXPECT_GT(ledger.peak(Tier::device, Category::params), 0u);  // gathered units, transiently
  std::string moved;
  if (param == OffloadDevice::nvme) {
    auto* ps = nvme_values(off);
    ASSERT_NE(ps, nullptr);
    const auto st = ps->swapper().stats();
    EXPECT_GT(st.bytes_read, 0u);  // more units than buffers: slices really came from the file
    EXPECT_GT(st.bytes_written, 0u);
    moved = fmt::format("; params swap read {} written {}", format_bytes(st.bytes_read),
                        format_bytes(st.bytes_written));
  }
  if (opt == OffloadDevice::nvme) {
    auto* os = dynamic_cast<offload::NvmeStateStore*>(&off.trainer.states());
    ASSERT_NE(os, nullptr);
    EXPECT_GT(os->swapper().stats().bytes_read, 0u);
  }
  if (w.rank() == 0)
    std::printf("np=%d %s params %s + optimizer %s: bitwise like device slices over %d steps; "
                "device params peak %s%s\n", N, std::string(dtype_name(dt)).c_str(),
                std::string(config::to_string(param)).c_str(),
                std::string(config::to_string(opt)).c_str(), steps,
                format_bytes(ledger.peak(Tier::device, Category::params)).c_str(), moved.c_str());
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return std::string(dtype_name(i.param.dtype)) + "_params_" +
         std::string(config::to_string(i.param.param)) + "_optimizer_" +
         std::string(config::to_string(i.param.opt));
}

INSTANTIATE_TEST_SUITE_P(
    Devices, ParamOffload,
    ::testing::Values(Case{DType::f32, OffloadDevice::cpu, OffloadDevice::none},
                      Case{DType::f32, OffloadDevice::nvme, OffloadDevice::none},
                      Case{DType::f32, OffloadDevice::nvme, OffloadDevice::nvme},
                      Case{DType::bf16, OffloadDevice::cpu, OffloadDevice::none},
                      Case{DType::bf16, OffloadDevice::nvme, OffloadDevice::none},
                      Case{DType::bf16, OffloadDevice::cpu, OffloadDevice::cpu},
                      Case{DType::bf16, OffloadDevice::nvme, OffloadDevice::nvme}),
    case_name);

class ParamOffloadUnderDeviceCap : public ::testing::TestWithParam<OffloadDevice> {};

// A device cap that holds gradients and the transient working set but not the parameter slices
// as well: fails without offload_param and trains with it. One rank per process (each on its
// own group): the laptop case. The optimizer state is on the host in both runs.
TEST_P(ParamOffloadUnderDeviceCap, FailsWithoutParamOffloadAndTrainsWithIt) {
  const OffloadDevice dev = GetParam();
  const auto& w = world();
  const parallel::Group self = w.split(w.rank(), 0, "self");
  const int b = 2;
  const DType dt = DType::f32;
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 8;  // many units: the slices of all of them dwarf the one or two gathered at once
  c.n_head = 4;
  c.n_embd = 96;
  const auto o = trainer_options(dt);
  offload::test::ScratchDir dir("param");
  const std::string d = dir.str();
  const auto with = param_config(dev, OffloadDevice::cpu, d);
  const auto without = param_config(OffloadDevice::none, OffloadDevice::cpu, d);
  // 1. Uncapped, offloaded: its device peak, and the slices' bytes it kept off the device.
  std::uint64_t peak_off = 0;
  double slices = 0, resident_without = 0;
  std::vector<double> losses;
  {
    MemoryLedger ledger;
    Replica r(c, offloaded(o, b, dt, with), self, parallel::TrainingExtras::on(&ledger));
    EXPECT_EQ(ledger.current(Tier::device, Category::params), 0u);
    for (std::size_t u = 0; u < r.store.num_units(); ++u)
      slices += static_cast<double>(r.store.layout(u).hi - r.store.layout(u).lo) * 4;
    resident_without = static_cast<double>(ledger.current(Tier::device)) + slices;
    BatchFeed f{1, 0, b, c.block_size, c.vocab_size};
    for (int s = 0; s < 3; ++s) losses.push_back(r.engine.train_step(std::ref(f)).loss);
    peak_off = ledger.peak(Tier::device);
  }
  // 2. A cap between the two: the slices do not fit beside the offloaded run's peak.
  ASSERT_GT(static_cast<double>(peak_off) + slices, 1.3 * static_cast<double>(peak_off))
      << "test setup: the parameter slices must be a large part of the device peak";
  const auto cap = static_cast<std::uint64_t>(static_cast<double>(peak_off) + slices / 2);
  {
    MemoryLedger ledger;
    ledger.set_cap(Tier::device, cap);
    try {
      Replica r(c, offloaded(o, b, dt, without), self, parallel::TrainingExtras::on(&ledger));
      BatchFeed f{1, 0, b, c.block_size, c.vocab_size};
      for (int s = 0; s < 3; ++s) r.engine.train_step(std::ref(f));
      ADD_FAILURE() << "trained under a " << format_bytes(cap) << " device cap with the slices "
                    << "on the device";
    } catch (const OutOfMemory& e) {
      bool names_param_offload = false;
      for (const auto& a : e.advice())
        names_param_offload = names_param_offload || a.find("offload_param") != std::string::npos;
      EXPECT_TRUE(names_param_offload) << e.what();
      EXPECT_EQ(e.context().tier, Tier::device);
    }
  }
  // 3. The same cap with offload_param: trains, the same losses as uncapped.
  {
    MemoryLedger ledger;
    ledger.set_cap(Tier::device, cap);
    Replica r(c, offloaded(o, b, dt, with), self, parallel::TrainingExtras::on(&ledger));
    BatchFeed f{1, 0, b, c.block_size, c.vocab_size};
    for (int s = 0; s < 3; ++s)
      EXPECT_EQ(r.engine.train_step(std::ref(f)).loss, losses[static_cast<std::size_t>(s)]);
    EXPECT_LE(ledger.peak(Tier::device), cap);
    if (w.rank() == 0)
      std::printf("offload_param %s: device cap %s (slices %s, resident without offload %s): "
                  "fails without, trains with; memory:\n%s",
                  std::string(config::to_string(dev)).c_str(), format_bytes(cap).c_str(),
                  format_bytes(static_cast<std::uint64_t>(slices)).c_str(),
                  format_bytes(static_cast<std::uint64_t>(resident_without)).c_str(),
                  ledger.report().c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ParamOffloadUnderDeviceCap,
                         ::testing::Values(OffloadDevice::cpu, OffloadDevice::nvme),
                         [](const auto& i) { return std::string(config::to_string(i.param)); });

// An I/O error in the params swap file fails the step that hit it, naming the file and the
// reason — a write-back at the end of the optimizer step, a read in the all-gather before
// forward — and the store stays failed.
TEST(ParamOffloadFaults, IoErrorInTheParamsSwapFileIsReportedWithItsName) {
  const auto& w = world();
  const parallel::Group self = w.split(w.rank(), 0, "self");
  const auto c = tiny_gpt();
  const auto o = trainer_options(DType::bf16);
  offload::test::ScratchDir dir("param");
  const auto cfg = param_config(OffloadDevice::none, OffloadDevice::none, dir.str());
  for (const offload::IoOp op : {offload::IoOp::write, offload::IoOp::read}) {
    std::atomic<bool> armed{false};
    offload::SwapperOptions so;
    so.dir = dir.str() + "/params";
    so.buffer_count = 2;
    so.aio.block_size = 8192;
    so.aio.fault = [&armed, op](const offload::IoRequestInfo& r) {
      return armed && r.op == op ? (op == offload::IoOp::write ? ENOSPC : EIO) : 0;
    };
    auto values = std::make_shared<offload::NvmeValueShardStore>(so);
    Replica r(c, offloaded(o, 2, DType::bf16, cfg), self, [&] { parallel::TrainingExtras e; e.value_store = values; return e; }());
    BatchFeed f{1, 0, 2, c.block_size, c.vocab_size};
    r.engine.train_step(std::ref(f));
    armed = true;
    std::string message;
    try {
      r.engine.train_step(std::ref(f));
    } catch (const Error& e) {
      message = e.what();
    }
    const char* what = op == offload::IoOp::write ? "write" : "read";
    ASSERT_FALSE(message.empty()) << "the " << what << " error was swallowed";
    EXPECT_NE(message.find(values->swapper().path()), std::string::npos) << message;
    EXPECT_NE(message.find("-params.swp"), std::string::npos) << message;
    EXPECT_NE(message.find(std::strerror(op == offload::IoOp::write ? ENOSPC : EIO)), std::string::npos)
        << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
    // The swap file's contents are unknown now: every later use fails the same way.
    armed = false;
    EXPECT_THROW(values->acquire(0), Error);
  }
}

}  // namespace test_offload_param
}  // namespace
