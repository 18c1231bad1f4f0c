// `strata ckpt` end to end when the strata binary has been built (skipped otherwise): verify's
// exit status is 0 for a good checkpoint and 1 for a corrupt or incomplete one, inspect lists
// the parameters, export/import round-trip.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/reader.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;

const std::string kStrata = std::string(STRATA_BINARY_DIR) + "/launcher/strata";

struct CliRun {
  int status = -1;
  std::string out;
};

CliRun run(const std::string& args) {
  CliRun r;
  FILE* p = ::popen((kStrata + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kStrata)) GTEST_SKIP() << kStrata << " not built";
  }
};

TEST_F(Cli, VerifyExitStatus) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 8, 3);
  CliRun r = run("ckpt verify " + tmp.str());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out;

  const std::string file = dir + "/rank_00002.h5";
  testing::flip_byte(file,
                     testing::dataset_offset(file, "/exp_avg_sq/transformer.ln_f.weight") + 1);
  r = run("ckpt verify " + dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(
      r.out.find("rank_00002.h5: dataset /exp_avg_sq/transformer.ln_f.weight: checksum mismatch"),
      std::string::npos)
      << r.out;
  EXPECT_EQ(run("ckpt verify --quick " + dir).status, 0);

  std::filesystem::remove(dir + "/rank_00001.h5");
  r = run("ckpt verify --quick " + dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("rank_00001.h5: rank file is missing"), std::string::npos) << r.out;

  EXPECT_EQ(run("ckpt verify " + tmp / "nothing-here").status, 1);
  EXPECT_EQ(run("ckpt verify").status, 2);  // usage
}

TEST_F(Cli, InspectExportImport) {
  TempDir tmp;
  testing::save_toy(tmp / "ck", 8, 2);
  CliRun r = run("ckpt inspect " + tmp / "ck");
  EXPECT_EQ(r.status, 0) << r.out;
  for (const char* s : {"step        8", "world 2 = dp 2 x tp 1 x pp 1, ZeRO stage 1",
                        "transformer.h.0.attn.c_attn.weight", "[15, 5]", "exp_avg (2)",
                        "loss scale 32768 (dynamic)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  r = run("ckpt export " + tmp / "ck" + " --output " + tmp / "m.h5");
  EXPECT_EQ(r.status, 0) << r.out;
  r = run("ckpt import " + tmp / "m.h5" + " --output " + tmp / "ft");
  EXPECT_EQ(r.status, 0) << r.out;
  CheckpointReader a(tmp / "ck/step_00000008"), b(tmp / "ft/step_00000000");
  EXPECT_EQ(a.read_f32("param", "transformer.wte.weight"),
            b.read_f32("param", "transformer.wte.weight"));
}

}  // namespace
}  // namespace strata::checkpoint
