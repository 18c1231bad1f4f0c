// STRATA_CHECKPOINT_FAULT_FILE: a save fault armed while the job runs (the chaos soak,
// cluster/chaos). Each case runs in a fresh process ("threadsafe" death tests re-execute the
// binary), since fault_point reads its variable once per process.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "framework/checkpoint/fault_point.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;

// Unsets the variable and removes the file when a test ends (in the parent process: the other
// tests of this binary must not see them).
struct Disarm {
  std::string file;
  ~Disarm() {
    unsetenv("STRATA_CHECKPOINT_FAULT_FILE");
    std::error_code ec;
    fs::remove(file, ec);
  }
};

std::string arm(const std::string& name, const std::string& spec) {
  const std::string file = ::testing::TempDir() + "strata_fault_file_" + name;
  if (spec.empty()) {
    fs::remove(file);
  } else {
    std::ofstream(file) << spec << "\n";
  }
  setenv("STRATA_CHECKPOINT_FAULT_FILE", file.c_str(), 1);
  return file;
}

TEST(FaultPointDeathTest, AnArmedFileKillsAtItsPointAndRankAndIsDeleted) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string file = arm("fires", "rank_file_tmp@1");
  Disarm disarm{file};
  EXPECT_EXIT(
      {
        fault_point("before_rank_file", 4, 1);  // another point
        fault_point("rank_file_tmp", 4, 0);     // another rank
        if (!fs::exists(file)) std::_Exit(2);   // not fired by those
        fault_point("rank_file_tmp", 8, 1);     // any step: the next save
        std::_Exit(3);
      },
      ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_FALSE(fs::exists(file)) << "the process that fired did not delete the file";
}

TEST(FaultPointDeathTest, AnyRankWithoutOneAndNothingOnceFired) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string file = arm("any", "after_latest");
  Disarm disarm{file};
  EXPECT_EXIT(
      {
        fault_point("after_manifest", 6, 0);
        fault_point("after_latest", 6, 3);
        std::_Exit(3);
      },
      ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_FALSE(fs::exists(file));
  arm("any", "");  // fired: not armed any more
  EXPECT_EXIT(
      {
        fault_point("after_latest", 9, 0);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(FaultPointDeathTest, AMalformedFileIsAUserError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Disarm disarm{arm("bad", "rank_file_tmp@x")};
  EXPECT_EXIT(
      {
        try {
          fault_point("rank_file_tmp", 4, 0);
        } catch (const UserError& e) {
          std::_Exit(std::string(e.what()).find("POINT or POINT@RANK") != std::string::npos ? 5 : 6);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(5), "");
}

}  // namespace
}  // namespace strata::checkpoint
