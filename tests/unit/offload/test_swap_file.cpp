// SwapFile: created under nvme_path only, charged to the nvme tier, removed at the end; bad
// paths are errors naming the path; stale files of dead jobs are cleaned up.
#include <gtest/gtest.h>

#include <sys/vfs.h>

#include <fstream>

#include "framework/memory/out_of_memory.hpp"
#include "offload/swap_file.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {

using test::ScratchDir;

bool on_tmpfs(const std::string& path) {
  struct statfs st{};
  return statfs(path.c_str(), &st) == 0 && st.f_type == 0x01021994;  // TMPFS_MAGIC
}

TEST(SwapFile, LivesUnderNvmePathChargedToNvmeAndIsRemovedAfterwards) {
  ScratchDir dir("swap");
  MemoryLedger ledger;
  std::string path;
  {
    SwapFile f(dir.str() + "/sub/dir", 2, "optimizer", Category::optimizer, ledger);
    path = f.path();
    EXPECT_EQ(std::filesystem::path(path).parent_path(), dir.path() / "sub/dir");
    EXPECT_NE(path.find("rank2-optimizer.swp"), std::string::npos) << path;
    EXPECT_EQ(f.grow(1), 0u);
    EXPECT_EQ(f.grow(5000), 4096u);
    EXPECT_EQ(f.size(), 4096u + 8192u);
    EXPECT_EQ(std::filesystem::file_size(path), f.size());
    EXPECT_EQ(ledger.current(Tier::nvme, Category::optimizer), f.size());
    if (!on_tmpfs(dir.str())) {
      EXPECT_TRUE(f.direct());  // ext4/xfs take O_DIRECT; tmpfs cannot
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(ledger.current(Tier::nvme), 0u);
}

TEST(SwapFile, NvmeCapIsEnforced) {
  ScratchDir dir("swapcap");
  MemoryLedger ledger;
  ledger.set_cap(Tier::nvme, 16384);
  SwapFile f(dir.str(), 0, "optimizer", Category::optimizer, ledger);
  f.grow(8192);
  EXPECT_THROW(f.grow(16384), OutOfMemory);
  EXPECT_EQ(f.size(), 8192u);
}

TEST(SwapFile, PathThatIsAFileOrCannotBeCreatedIsAUserErrorNamingIt) {
  ScratchDir dir("swapbad");
  const std::string file = dir.str() + "/not_a_dir";
  std::ofstream(file) << "x";
  MemoryLedger ledger;
  try {
    SwapFile f(file, 0, "optimizer", Category::optimizer, ledger);
    FAIL() << "a file accepted as nvme_path";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  const std::string impossible = "/proc/self/strata-no-such-dir";
  try {
    SwapFile f(impossible, 0, "optimizer", Category::optimizer, ledger);
    FAIL() << "an uncreatable nvme_path accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(impossible), std::string::npos) << e.what();
  }
}

TEST(SwapFile, StaleFilesOfDeadJobsAreRemovedLiveOnesKept) {
  ScratchDir dir("stale");
  MemoryLedger ledger;
  SwapFile mine(dir.str(), 0, "optimizer", Category::optimizer, ledger);
  // A name in the same pattern but for a pid that cannot exist (above pid_max).
  const std::string host = std::filesystem::path(mine.path()).filename().string();
  const std::string prefix = host.substr(0, host.find("-pid"));
  const auto dead = dir.path() / (prefix + "-pid999999999-rank1-optimizer.swp");
  const auto other = dir.path() / "unrelated.swp";
  std::ofstream(dead) << "x";
  std::ofstream(other) << "x";
  EXPECT_EQ(remove_stale_swap_files(dir.str()), 1);
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(std::filesystem::exists(mine.path()));
}

}  // namespace
}  // namespace strata::offload
