// Limits on hostile or mistaken input: JSON depth and number sizes checked before parsing, output
// paths that are devices or directories refused, and error messages bounded and mapped to the
// exit-status table.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "framework/core/error.hpp"
#include "framework/core/exit_status.hpp"
#include "framework/core/json_limits.hpp"
#include "framework/core/output_path.hpp"
#include "framework/memory/exit_report.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/out_of_memory.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonLimits, DeepNestingIsRefusedWithItsPosition) {
  const std::string deep = "{\"a\":\n " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const std::string msg = message_of([&] { check_json_limits(deep, "c.json", "config"); });
  EXPECT_EQ(msg,
            "[config] c.json:2:65: JSON nested more than 64 levels deep (Strata's inputs need a few)");
  // 64 levels are fine, and brackets inside strings do not count.
  const std::string ok = std::string(63, '[') + "\"[[[[{{{{\\\"[[[[\"" + std::string(63, ']');
  EXPECT_NO_THROW(check_json_limits("{\"a\":" + ok + "}", "c.json", "config"));
}

TEST(JsonLimits, HugeNumbersAreRefusedWithoutEchoingThem) {
  const std::string big = "{\"a\": 1" + std::string(100000, '7') + "}";
  const std::string msg = message_of([&] { check_json_limits(big, "c.json", "config"); });
  EXPECT_NE(msg.find("c.json:1:7: a number of 100001 characters (1777777777777777...)"),
            std::string::npos)
      << msg;
  EXPECT_LT(msg.size(), 200u);
  EXPECT_NE(message_of([&] {
              check_json_limits("[1e400]", "v", "config");
            }).find("the number 1e400 is too large"),
            std::string::npos);
  EXPECT_NO_THROW(check_json_limits("[1e300, -3.5e-7, 0, 18446744073709551615]", "v", "config"));
  EXPECT_NO_THROW(check_json_limits("[\"1" + std::string(1000, '0') + "\"]", "v", "config"));
}

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "strata-out-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(OutputPath, OnlyRegularFilesOrNewPathsAreOutputs) {
  EXPECT_NO_THROW(check_output_file(dir_ + "/new.h5", "t", "--output"));
  std::ofstream(dir_ + "/old.h5") << "x";
  EXPECT_NO_THROW(check_output_file(dir_ + "/old.h5", "t", "--output"));
  EXPECT_NE(message_of([&] { check_output_file(dir_, "t", "--output"); }).find("is a directory"),
            std::string::npos);
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  EXPECT_NE(message_of([&] {
              check_output_file(dir_ + "/fifo", "t", "--output");
            }).find("is a FIFO, not a regular file: writing there would replace it"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              check_output_file("/dev/full", "t", "--output");
            }).find("'/dev/full' is a character device"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              check_output_file(dir_ + "/no/x.h5", "t", "--output");
            }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              check_output_file("/proc/strata-x.h5", "t", "--output");
            }).find("cannot create files in '/proc'"),
            std::string::npos);
  for (const auto& e : fs::directory_iterator(dir_))  // the probes are gone
    EXPECT_EQ(e.path().filename().string().rfind(".strata-probe", 0), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/new.h5"));
}

TEST_F(OutputPath, OutputDirectoriesMustBeDirectoriesOrCreatable) {
  EXPECT_NO_THROW(check_output_dir(dir_, "t", "dir"));
  EXPECT_NO_THROW(check_output_dir(dir_ + "/a/b/c", "t", "dir"));
  EXPECT_FALSE(fs::exists(dir_ + "/a"));  // checked, not created
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_NE(message_of([&] {
              check_output_dir(dir_ + "/file", "t", "dir");
            }).find("is a file, not a directory"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              check_output_dir(dir_ + "/file/sub", "t", "dir");
            }).find("cannot be created: '" + dir_ + "/file' is a file"),
            std::string::npos);
}

TEST(ExitReport, StatusesFollowTheTable) {
  EXPECT_EQ(exit_status_for(UserError("config", "x")), kExitBadInput);
  EXPECT_EQ(exit_status_for(Error("checkpoint", "x")), kExitFailure);
  EXPECT_EQ(exit_status_for(std::runtime_error("x")), kExitFailure);
  OomContext ctx{};  // value-initialised: a tier and category that exist
  EXPECT_EQ(exit_status_for(OutOfMemory(ctx, {})), kExitOutOfMemory);
  EXPECT_FALSE(restart_can_help(kExitBadInput));
  EXPECT_FALSE(restart_can_help(kExitUsage));
  EXPECT_FALSE(restart_can_help(kExitOutOfMemory));
  EXPECT_TRUE(restart_can_help(kExitFailure));
  EXPECT_TRUE(restart_can_help(137));
}

TEST(ExitReport, MessagesAreBoundedAndKeepTheirEnd) {
  const std::string huge = "--set x=" + std::string(100000, '[') + ": nested too deep";
  const std::string b = bounded_message(huge);
  EXPECT_LT(b.size(), 600u);
  EXPECT_NE(b.find("characters left out"), std::string::npos);
  EXPECT_NE(b.find(": nested too deep"), std::string::npos) << "the reason is kept";
  EXPECT_EQ(bounded_message("a\x1b[31mb"), "a?[31mb");  // no escape sequences to a terminal
  std::string many;
  for (int i = 0; i < 100; ++i) many += "line\n";
  EXPECT_NE(bounded_message(many).find("(60 more lines)"), std::string::npos);
}

}  // namespace
}  // namespace strata
