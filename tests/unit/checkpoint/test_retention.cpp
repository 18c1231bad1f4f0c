// Retention keeps the newest K complete checkpoints plus every M-th step plus whatever `latest`
// names, removes leftovers of failed saves, and never touches a save newer than the newest
// complete checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/latest.hpp"
#include "framework/checkpoint/reclaim.hpp"
#include "framework/checkpoint/retention.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

std::vector<std::int64_t> steps(const std::string& root) {
  std::vector<std::int64_t> out;
  for (const auto& c : list_step_dirs(root)) out.push_back(c.step);
  return out;
}

TEST(Retention, NewestKPlusEveryMth) {
  TempDir tmp;
  for (std::int64_t s = 10; s <= 80; s += 10) testing::save_toy(tmp.str(), s, 1);
  const auto removed = apply_retention(tmp.str(), RetentionPolicy{2, 30});
  EXPECT_EQ(steps(tmp.str()), (std::vector<std::int64_t>{30, 60, 70, 80}));
  EXPECT_EQ(removed.size(), 4u);
  EXPECT_EQ(removed.front(), tmp / "step_00000010");
}

TEST(Retention, AppliedBySaveAndZeroMeansKeepAll) {
  TempDir tmp;
  for (std::int64_t s = 1; s <= 5; ++s)
    testing::save_toy(tmp.str(), s, 2, DType::f32, RetentionPolicy{3, 0});
  EXPECT_EQ(steps(tmp.str()), (std::vector<std::int64_t>{3, 4, 5}));
  apply_retention(tmp.str(), RetentionPolicy{0, 0});
  EXPECT_EQ(steps(tmp.str()), (std::vector<std::int64_t>{3, 4, 5}));
}

TEST(Retention, NeverRemovesWhatLatestNames) {
  TempDir tmp;
  for (std::int64_t s = 1; s <= 4; ++s) testing::save_toy(tmp.str(), s, 1);
  update_latest_atomic(tmp.str(), "step_00000001");
  apply_retention(tmp.str(), RetentionPolicy{1, 0});
  EXPECT_EQ(steps(tmp.str()), (std::vector<std::int64_t>{1, 4}));
}

TEST(Retention, RemovesOldIncompleteDirsButNotNewerOnes) {
  TempDir tmp;
  testing::save_toy(tmp.str(), 10, 1);
  fs::create_directories(tmp / "step_00000005");  // an old failed save
  testing::save_toy(tmp.str(), 20, 1);
  fs::create_directories(tmp / "step_00000030");  // possibly a save in progress
  apply_retention(tmp.str(), RetentionPolicy{5, 0});
  EXPECT_EQ(steps(tmp.str()), (std::vector<std::int64_t>{10, 20, 30}));
}

// Names in root other than step directories (what retention leaves behind besides them).
std::vector<std::string> others(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step_", 0) != 0 && n != "latest") out.push_back(n);
  }
  return out;
}

TEST(Retention, RemovedCheckpointsVanishAtOnceAndTheirFilesGoInTheBackground) {
  TempDir tmp;
  for (std::int64_t s = 1; s <= 3; ++s) testing::save_toy(tmp.str(), s, 2);
  const auto removed = apply_retention(tmp.str(), RetentionPolicy{1, 0});
  ASSERT_EQ(removed.size(), 2u);
  for (const auto& d : removed) EXPECT_FALSE(fs::exists(d)) << d;  // out of sight already
  EXPECT_EQ(steps(tmp.str()), (std::vector<std::int64_t>{3}));
  wait_for_reclaim();
  EXPECT_TRUE(others(tmp.str()).empty());  // and deleted
}

TEST(Retention, LeftoversOfAnInterruptedDeletionAreDeletedByTheNextRetention) {
  TempDir tmp;
  testing::save_toy(tmp.str(), 1, 1);
  // A crash after the rename, before the files were deleted.
  fs::create_directories(tmp / ".deleting-step_00000000/sub");
  std::ofstream(tmp / ".deleting-step_00000000/sub/rank_00000.h5") << "x";
  EXPECT_EQ(others(tmp.str()), (std::vector<std::string>{".deleting-step_00000000"}));
  EXPECT_TRUE(find_latest(tmp.str()));  // never mistaken for a checkpoint
  apply_retention(tmp.str(), RetentionPolicy{5, 0});
  wait_for_reclaim();
  EXPECT_TRUE(others(tmp.str()).empty());
  EXPECT_EQ(steps(tmp.str()), (std::vector<std::int64_t>{1}));
}

}  // namespace
}  // namespace strata::checkpoint
