// offload::validate and make_state_store: the config's offload settings become the right store,
// and settings that cannot work are UserErrors naming the key before training starts.
#include <gtest/gtest.h>

#include <filesystem>
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
  n->create(0, test::adam_layout(10, true, true), Tensor::zeros({10}, DType::f32));
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


config::Config with_param_offload(OffloadDevice d, const std::string& path = {}) {
  config::Config c;
  c.zero_optimization.stage = 3;
  c.zero_optimization.offload_param.device = d;
  c.zero_optimization.offload_param.nvme_path = path;
  return c;
}

TEST(OffloadFactory, ParamOffloadIsAcceptedAtStageThreeAndChecksItsKeys) {
  ScratchDir dir("factoryparam");
  validate(with_param_offload(OffloadDevice::cpu), 3);
  auto ok = with_param_offload(OffloadDevice::nvme, dir.str() + "/params");
  validate(ok, 3);  // creates the directory
  EXPECT_TRUE(std::filesystem::is_directory(dir.str() + "/params"));
  EXPECT_NE(describe(ok).find("parameters as owned slices on nvme (" + dir.str() + "/params"),
            std::string::npos) << describe(ok);
  EXPECT_NE(describe(with_param_offload(OffloadDevice::cpu)).find("parameters as owned slices on the host"),
            std::string::npos);
  // Both on NVMe, even in the same directory (the files are named ...-params / ...-optimizer).
  auto both = ok;
  both.zero_optimization.offload_optimizer.device = OffloadDevice::nvme;
  both.zero_optimization.offload_optimizer.nvme_path = dir.str() + "/params";
  validate(both, 3);
  for (int stage : {0, 1, 2}) expect_user_error(with_param_offload(OffloadDevice::cpu), stage, "offload_param.device");
  expect_user_error(with_param_offload(OffloadDevice::nvme), 3, "offload_param.nvme_path is not set");
  auto bc = ok;
  bc.zero_optimization.offload_param.buffer_count = 1;
  expect_user_error(bc, 3, "offload_param.buffer_count");
  auto bs = ok;
  bs.zero_optimization.offload_param.buffer_size = 5000;
  expect_user_error(bs, 3, "offload_param.buffer_size");
  auto mc = ok;
  mc.zero_optimization.offload_param.max_in_cpu = 5000;
  expect_user_error(mc, 3, "offload_param.max_in_cpu");
  auto ck = with_param_offload(OffloadDevice::nvme, dir.str() + "/ckpt/params");
  ck.strata.checkpoint.dir = dir.str() + "/ckpt";
  expect_user_error(ck, 3, "offload_param.nvme_path");
  const std::string file = dir.str() + "/file";
  std::ofstream(file) << "x";
  expect_user_error(with_param_offload(OffloadDevice::nvme, file), 3, "offload_param.nvme_path");
  auto blk = ok;
  blk.aio.block_size = 1000;
  expect_user_error(blk, 3, "aio.block_size");
}

}  // namespace
}  // namespace strata::offload
