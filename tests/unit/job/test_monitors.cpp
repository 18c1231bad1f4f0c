// DeepSpeed's monitors (launcher/job/monitors.hpp): TensorBoard event files read back by the
// project's own reader (framing, CRC-32C, the Event encoding; TensorBoard's own reader runs in
// tests/python/test_monitors.py where the tensorboard package is installed), DeepSpeed's CSV
// layout, and the config keys that turn them on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/config/config.hpp"
#include "launcher/job/monitors.hpp"
#include "launcher/job/tfevents.hpp"

namespace strata::job {
namespace {
namespace test_monitors {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("strata_test_monitors_" + name);
  fs::remove_all(p);
  return p;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Monitors, Crc32cOfTheStandardCheck) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // CRC-32C's check value
}

TEST(Monitors, EventFileReadsBack) {
  const fs::path dir = scratch("tb");
  std::string path;
  {
    TfEventsWriter w(dir.string());
    path = w.path();
    w.scalars(16, {{"Train/Samples/train_loss", 5.25}, {"Train/Samples/lr", 1e-3}});
    w.scalars(32, {{"Train/Samples/train_loss", 4.5}});
  }
  EXPECT_NE(fs::path(path).filename().string().find("events.out.tfevents."), std::string::npos);
  const auto events = read_tfevents(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].step, 16);
  ASSERT_EQ(events[1].scalars.size(), 2u);
  EXPECT_EQ(events[1].scalars[0].first, "Train/Samples/train_loss");
  EXPECT_EQ(events[1].scalars[0].second, 5.25f);
  EXPECT_EQ(events[1].scalars[1].second, 1e-3f);
  EXPECT_EQ(events[2].step, 32);
  EXPECT_GT(events[2].wall_time, 1.7e9);
  // A flipped byte is found by the CRC, naming the record.
  std::string bytes = read(path);
  bytes[bytes.size() - 6] ^= 0x20;
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_THROW(read_tfevents(path), UserError);
}

TEST(Monitors, CsvInDeepSpeedsLayout) {
  const fs::path dir = scratch("csv");
  {
    CsvMonitor m(dir.string());
    m.write(8, {{"Train/Samples/train_loss", 5.5}, {"Train/Samples/lr", 0.001}});
    m.write(16, {{"Train/Samples/train_loss", 5.0}});
  }
  EXPECT_EQ(read(dir / "Train_Samples_train_loss.csv"), "step,train_loss\n8,5.5\n16,5\n");
  EXPECT_EQ(read(dir / "Train_Samples_lr.csv"), "step,lr\n8,0.001\n");
  CsvMonitor resumed(dir.string());  // a resumed run appends, without a second header
  resumed.write(24, {{"Train/Samples/lr", 0.002}});
  EXPECT_EQ(read(dir / "Train_Samples_lr.csv"), "step,lr\n8,0.001\n24,0.002\n");
}

TEST(Monitors, ConfigTurnsThemOnUnderOutputPathAndJobName) {
  const fs::path dir = scratch("cfg");
  const config::Config c = config::parse_config(nlohmann::json::parse(
      R"({"train_micro_batch_size_per_gpu": 2,
          "tensorboard": {"enabled": true, "output_path": ")" + dir.string() + R"(", "job_name": "run1"},
          "csv_monitor": {"enabled": true, "output_path": ")" + dir.string() + R"(/csv"}})"));
  EXPECT_EQ(c.csv_monitor.job_name, "DeepSpeedJobName");
  Monitors on_rank1(c, false);
  EXPECT_FALSE(on_rank1.any());
  Monitors m(c, true);
  ASSERT_TRUE(m.any());
  EXPECT_EQ(fs::path(m.tensorboard_file()).parent_path(), dir / "run1");
  StepReport r;
  r.loss = 3.0;
  r.result.lr = 0.5;
  r.result.grad_norm = 1.0;
  r.tokens_per_s = 100;
  MemorySnapshot mem{};
  mem.tier_peak[static_cast<int>(Tier::device)] = 4096;
  m.write(2, r, mem);
  EXPECT_EQ(read(dir / "csv" / "DeepSpeedJobName" / "Memory_device_peak_bytes.csv"),
            "step,peak_bytes\n2,4096\n");
  const auto events = read_tfevents(m.tensorboard_file());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].scalars.size(), 5u);  // loss, lr, grad norm, tokens/s, device peak
}

TEST(Monitors, WandbIsAOneLineErrorAndEmptyOutputPathIsUnset) {
  try {
    config::parse_config(nlohmann::json::parse(
        R"({"train_micro_batch_size_per_gpu": 2, "wandb": {"enabled": true}})"));
    FAIL() << "wandb accepted";
  } catch (const config::ConfigError& e) {
    ASSERT_EQ(e.lines().size(), 1u);
    EXPECT_NE(e.lines()[0].find("not available without one"), std::string::npos) << e.lines()[0];
  }
  const config::Config c = config::parse_config(nlohmann::json::parse(
      R"({"train_micro_batch_size_per_gpu": 2, "tensorboard": {"enabled": false, "output_path": ""}})"));
  EXPECT_EQ(c.tensorboard.output_path, "");
}

}  // namespace test_monitors
}  // namespace
}  // namespace strata::job
