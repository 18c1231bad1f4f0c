// offload::validate and make_state_store: the config's offload settings become the right store,
// and settings that cannot work are UserErrors naming the key before training starts.
#include <gtest/gtest.h>

#include <fstream>

#include "offload/factory.hpp"
#include "offload/host_state_store.hpp"
#include "offload/nvme_state_store.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {

using config::OffloadDevice;
using test::ScratchDir;

config::Config with_offload(OffloadDevice d, const std::string& path = {}) {
  config::Config c;
  c.zero_optimization.stage = 2;
  c.zero_optimization.offload_optimizer.device = d;
  c.zero_optimization.offload_optimizer.nvme_path = path;
  return c;
}

void expect_user_error(const config::Config& c, int stage, const std::string& needle) {
  try {
    validate(c, stage);
    FAIL() << "accepted; wanted an error mentioning " << needle;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(OffloadFactory, BuildsTheStoreTheConfigAsksFor) {
  ScratchDir dir("factory");
  MemoryLedger ledger;
  TensorOptions mem;
  mem.ledger = &ledger;
  EXPECT_EQ(make_state_store(with_offload(OffloadDevice::none), 0, mem), nullptr);
  auto cpu = make_state_store(with_offload(OffloadDevice::cpu), 0, mem);
  EXPECT_NE(dynamic_cast<HostStateStore*>(cpu.get()), nullptr);
  auto c = with_offload(OffloadDevice::nvme, dir.str());
  c.aio.block_size = 8192;
  validate(c, 2);
  auto nvme = make_state_store(c, 5, mem);
  auto* n = dynamic_cast<NvmeStateStore*>(nvme.get());
  ASSERT_NE(n, nullptr);
  EXPECT_NE(n->swapper().path().find("rank5"), std::string::npos);
  EXPECT_EQ(n->swapper().buffer_count(), 4);  // DeepSpeed's default buffer_count
  n->create(0, {10, true, true}, Tensor::zeros({10}, DType::f32));
  EXPECT_GT(ledger.current(Tier::nvme, Category::optimizer), 0u);
  EXPECT_NE(describe(c).find(dir.str()), std::string::npos);
}

TEST(OffloadFactory, RejectsOffloadWithoutTheStageItNeeds) {
  expect_user_error(with_offload(OffloadDevice::cpu), 0, "stage >= 1");
  auto c = with_offload(OffloadDevice::none);
  c.zero_optimization.offload_param.device = OffloadDevice::cpu;
  expect_user_error(c, 2, "stage = 3");
}

TEST(OffloadFactory, RejectsBadNvmePaths) {
  ScratchDir dir("factorybad");
  const std::string file = dir.str() + "/file";
  std::ofstream(file) << "x";
  expect_user_error(with_offload(OffloadDevice::nvme, file), 1, file);
  // Swap files never go into the checkpoint directory (a failing swap must not touch it).
  auto c = with_offload(OffloadDevice::nvme, dir.str() + "/ckpt/swap");
  c.strata.checkpoint.dir = dir.str() + "/ckpt";
  expect_user_error(c, 1, "strata.checkpoint.dir");
  auto d = with_offload(OffloadDevice::nvme, dir.str());
  d.zero_optimization.offload_optimizer.buffer_count = 1;
  expect_user_error(d, 1, "buffer_count");
  expect_user_error(with_offload(OffloadDevice::nvme, "/proc/self/strata-x"), 1, "/proc/self/strata-x");
  // A sibling of the checkpoint directory is fine.
  auto e = with_offload(OffloadDevice::nvme, dir.str() + "/swap");
  e.strata.checkpoint.dir = dir.str() + "/ckpt";
  validate(e, 1);
}

}  // namespace
}  // namespace strata::offload
