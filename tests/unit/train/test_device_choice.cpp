// strata.device "auto" and fp16/bf16 "enabled": "auto" (train::resolve_device): the GPU when one is
// usable, else the CPU, each choice a config note; "cuda" without a usable GPU stays an error.
// The GPU branches (bf16 on a GPU without bfloat16 refused naming fp16; "auto" precision bf16 or
// fp16 by compute capability) run where a GPU is visible.
#include <gtest/gtest.h>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/config/config.hpp"
#include "framework/config/overrides.hpp"
#include "framework/train/from_config.hpp"

namespace strata {
namespace {
namespace test_device_choice {

config::Config parse(const std::string& text) {
  return config::parse_config(nlohmann::json::parse(text));
}

bool gpu_usable() { return cuda::compiled() && cuda::device_count() > 0 && ops::cuda_op_table(); }

bool has_note(const config::Config& c, const std::string& part) {
  for (const auto& n : c.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(DeviceChoice, AutoIsTheDefaultAndRoundTrips) {
  const config::Config c = parse(R"({"train_micro_batch_size_per_gpu": 2})");
  EXPECT_FALSE(c.strata.device.has_value());
  EXPECT_EQ(config::to_json(c)["strata"]["device"], "auto");
  EXPECT_EQ(parse(config::to_json(c).dump()).strata.device, std::nullopt);
}

TEST(DeviceChoice, AutoBecomesOneDeviceWithANote) {
  config::Config c = parse(R"({"train_micro_batch_size_per_gpu": 2})");
  train::resolve_device(c);
  ASSERT_TRUE(c.strata.device.has_value());
  if (gpu_usable()) {
    EXPECT_EQ(*c.strata.device, DeviceType::cuda);
    EXPECT_TRUE(has_note(c, "strata.device \"auto\": the GPU cuda:0"));
  } else {
    EXPECT_EQ(*c.strata.device, DeviceType::cpu);
    EXPECT_TRUE(has_note(c, "strata.device \"auto\": the CPU ("));
  }
  EXPECT_EQ(train::compute_device(c).type, *c.strata.device);
}

TEST(DeviceChoice, CpuStaysCpuWithoutANote) {
  config::Config c = parse(R"({"train_micro_batch_size_per_gpu": 2, "strata": {"device": "cpu"}})");
  train::resolve_device(c);
  EXPECT_EQ(c.strata.device, DeviceType::cpu);
  EXPECT_FALSE(has_note(c, "strata.device"));
}

TEST(DeviceChoice, CudaWithoutAUsableGpuIsAnError) {
  if (gpu_usable()) GTEST_SKIP() << "a GPU is usable here: " << cuda::describe_devices();
  config::Config c = parse(R"({"train_micro_batch_size_per_gpu": 2, "strata": {"device": "cuda"}})");
  try {
    train::resolve_device(c);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("strata.device is \"cuda\""), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(DeviceChoice, AutoPrecisionFollowsTheDevice) {
  config::Config c = parse(
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}})");
  EXPECT_TRUE(c.bf16.automatic && c.fp16.automatic);
  EXPECT_FALSE(c.bf16.enabled || c.fp16.enabled);
  EXPECT_EQ(config::to_json(c)["bf16"]["enabled"], "auto");  // kept through the resolved config
  EXPECT_TRUE(parse(config::to_json(c).dump()).bf16.automatic);
  train::resolve_device(c);
  EXPECT_FALSE(c.bf16.automatic || c.fp16.automatic);
  if (!gpu_usable()) {
    EXPECT_FALSE(c.bf16.enabled || c.fp16.enabled);
    EXPECT_TRUE(has_note(c, "float32 on the CPU"));
    return;
  }
  const bool bf16 = cuda::device_properties(0).major >= 8;
  EXPECT_EQ(c.bf16.enabled, bf16);
  EXPECT_EQ(c.fp16.enabled, !bf16);
  EXPECT_TRUE(c.fp16.enabled ? c.fp16.dynamic() : true);
}

TEST(DeviceChoice, AnExplicitPrecisionWinsOverAuto) {
  config::Config c = parse(
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": "auto"}, "fp16": {"enabled": true}})");
  EXPECT_FALSE(c.bf16.automatic);
  EXPECT_TRUE(c.fp16.enabled);
}

TEST(DeviceChoice, cuda_Bf16OnAGpuWithoutBfloat16NamesFp16) {
  if (!gpu_usable()) GTEST_SKIP() << "no usable GPU: " << cuda::describe_devices();
  if (cuda::device_properties(0).major >= 8)
    GTEST_SKIP() << "GPU 0 has bfloat16 (compute capability " << cuda::device_properties(0).major
                 << "): the refusal needs one below 8.0 (a T4)";
  config::Config c = parse(
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "strata": {"device": "cuda"}})");
  try {
    train::resolve_device(c);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("fp16.enabled=true"), std::string::npos) << e.what();
  }
}

// Where a GPU is usable (the GPU check runs this): "auto" is that GPU, and "auto" precision is bf16
// at compute capability 8.0 or newer, fp16 with dynamic loss scaling below (a T4), each noted once.
TEST(DeviceChoice, cuda_AutoIsTheGpuWithThePrecisionItComputes) {
  if (!gpu_usable()) GTEST_SKIP() << "no usable GPU: " << cuda::describe_devices();
  config::Config c = parse(
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}})");
  train::resolve_device(c);
  EXPECT_EQ(c.strata.device, DeviceType::cuda);
  EXPECT_EQ(train::compute_device(c), Device::cuda(0));
  const bool bf16 = cuda::device_properties(0).major >= 8;
  EXPECT_EQ(c.bf16.enabled, bf16);
  EXPECT_EQ(c.fp16.enabled, !bf16);
  if (c.fp16.enabled) {
    EXPECT_TRUE(c.fp16.dynamic());
  }
  int device_notes = 0, precision_notes = 0;
  for (const auto& n : c.notes) {
    device_notes += n.find("strata.device \"auto\": the GPU cuda:0") != std::string::npos;
    precision_notes += n.find(bf16 ? "auto: bf16.enabled: bf16" : "auto: fp16.enabled: fp16") !=
                       std::string::npos;
  }
  EXPECT_EQ(device_notes, 1);
  EXPECT_EQ(precision_notes, 1);
}

// A memory plan is of the job as it would run here: "auto" resolved as train_gpt resolves it.
TEST(DeviceChoice, APlanResolvesAutoAsTheRunDoes) {
  const std::string text =
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}})";
  config::Config run = parse(text), plan = parse(text);
  train::resolve_device(run);
  train::resolve_device_for_plan(plan);
  EXPECT_EQ(plan.strata.device, run.strata.device);
  EXPECT_EQ(plan.bf16.enabled, run.bf16.enabled);
  EXPECT_EQ(plan.fp16.enabled, run.fp16.enabled);
  EXPECT_EQ(plan.notes, run.notes);
}

// "cuda" where no GPU is usable: a plan for a GPU elsewhere (not the run's error), "auto" precision
// planned as bf16 with a note whose advice plans fp16 when followed.
TEST(DeviceChoice, APlanForAGpuElsewhereAssumesBf16AndSaysHowToPlanFp16) {
  if (gpu_usable()) GTEST_SKIP() << "a GPU is usable here: " << cuda::describe_devices();
  const std::string text =
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
          "strata": {"device": "cuda"}})";
  config::Config c = parse(text);
  train::resolve_device_for_plan(c);
  EXPECT_EQ(c.strata.device, DeviceType::cuda);
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_FALSE(c.fp16.enabled || c.bf16.automatic || c.fp16.automatic);
  ASSERT_TRUE(has_note(c, "--set fp16.enabled=true plans that"));
  // The note's advice, followed literally.
  nlohmann::json doc = nlohmann::json::parse(text);
  config::apply_override(doc, "fp16.enabled=true");
  config::Config fp16 = config::parse_config(doc);
  train::resolve_device_for_plan(fp16);
  EXPECT_TRUE(fp16.fp16.enabled);
  EXPECT_FALSE(fp16.bf16.enabled);
  // An explicit precision is kept as it is.
  config::Config f32 = parse(R"({"train_micro_batch_size_per_gpu": 2, "strata": {"device": "cuda"}})");
  train::resolve_device_for_plan(f32);
  EXPECT_FALSE(f32.bf16.enabled || f32.fp16.enabled);
}

}  // namespace test_device_choice
}  // namespace
}  // namespace strata
