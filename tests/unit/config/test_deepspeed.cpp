// DeepSpeed and Hugging Face configs: "auto" resolved as Hugging Face's integration does, old
// names, keys that change nothing (noted, and really changing nothing), every problem at once,
// the DeepSpeed key table and its page in docs/config.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "framework/config/config.hpp"
#include "framework/config/deepspeed_keys.hpp"
#include "framework/config/overrides.hpp"
#include "framework/config/schema.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

bool has_note(const Config& c, std::string_view start) {
  return std::any_of(c.notes.begin(), c.notes.end(),
                     [&](const std::string& n) { return n.starts_with(start); });
}

Config accepted(const json& doc, std::optional<std::int64_t> world_size = std::nullopt) {
  CheckResult r = check_config(doc, world_size);
  for (const auto& p : r.problems.list()) ADD_FAILURE() << p.text;
  return r.config;
}

TEST(HuggingFaceAuto, BatchSizesComeFromEachOtherAndTheWorldSize) {
  Config c = accepted(json::parse(R"({"train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto"})"),
                      std::int64_t{4});
  EXPECT_EQ(c.train_batch_size, 16);
  EXPECT_EQ(c.gradient_accumulation_steps, 1);
  EXPECT_TRUE(has_note(c, "auto: train_batch_size = train_micro_batch_size_per_gpu ×"));

  c = accepted(json::parse(R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": 2})"),
               std::int64_t{4});
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
  EXPECT_TRUE(has_note(c, "auto: train_micro_batch_size_per_gpu = train_batch_size /"));
}

// Nothing determines an "auto" micro-batch and no device cap lets the memory planner choose it:
// Hugging Face's default of --per_device_train_batch_size, 8, noted with the --set that gives
// another.
TEST(HuggingFaceAuto, MicroBatchNothingDeterminesTakesHuggingFacesDefault) {
  json doc = json::parse(R"({"train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4})");
  Config c = accepted(doc, std::int64_t{2});
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c.train_batch_size, 64);  // 8 × 4 × 2
  EXPECT_TRUE(has_note(c, "auto: train_micro_batch_size_per_gpu = 8, the default of Hugging "
                          "Face's --per_device_train_batch_size"));
  EXPECT_TRUE(has_note(c, "auto: train_batch_size = train_micro_batch_size_per_gpu ×"));
  // The --set the note names, followed literally, gives another value.
  apply_override(doc, "train_micro_batch_size_per_gpu=4");
  c = accepted(doc, std::int64_t{2});
  EXPECT_EQ(c.train_batch_size, 32);
  EXPECT_FALSE(has_note(c, "auto: train_micro_batch_size_per_gpu"));
  // A given train_batch_size still determines it (not the default).
  c = accepted(json::parse(R"({"train_batch_size": 12,
      "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 3})"),
               std::int64_t{2});
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 2);
}

// With a device cap the memory planner chooses an "auto" micro-batch (parallel/plan; its tests
// are in tests/unit/plan): the config layer accepts it with a note and leaves it to the program;
// resolving it without a planner says what to do.
TEST(HuggingFaceAuto, MicroBatchWithADeviceCapIsLeftToTheMemoryPlanner) {
  json doc = json::parse(R"({"train_micro_batch_size_per_gpu": "auto"})");
  apply_override(doc, "strata.memory.device_limit=64MiB");
  const Config c = accepted(doc);
  EXPECT_TRUE(c.micro_batch_auto);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 0);
  EXPECT_TRUE(has_note(c, "auto: train_micro_batch_size_per_gpu = the largest micro-batch whose "
                          "training step fits strata.memory.device_limit"));
  Config unplanned = c;
  EXPECT_TRUE(testing::fails_with([&] { resolve_batch(unplanned, 1); },
                                  {"this program has no memory planner to choose it",
                                   "--set train_micro_batch_size_per_gpu=8"}));
}

TEST(HuggingFaceAuto, ScheduleFollowsTheOptimizerAndTrainSteps) {
  const Config c = accepted(json::parse(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
      "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto",
          "warmup_max_lr": "auto", "warmup_num_steps": 10, "total_num_steps": "auto"}},
      "strata": {"train_steps": 500}})"));
  EXPECT_DOUBLE_EQ(c.scheduler.warmup_min_lr, 0.0);
  EXPECT_DOUBLE_EQ(c.scheduler.warmup_max_lr, 3e-4);
  EXPECT_EQ(c.scheduler.total_num_steps, 500);
  EXPECT_TRUE(has_note(c, "auto: scheduler.params.warmup_max_lr = 0.0003 (optimizer.params.lr"));
}

// What Hugging Face fills from its command line takes the default of its flag
// (TrainingArguments), noted with the value and the --set that gives another.
TEST(HuggingFaceAuto, CommandLineValuesTakeHuggingFacesDefaults) {
  json doc = json::parse(R"({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": "auto",
      "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
          "weight_decay": "auto"}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": "auto",
          "warmup_num_steps": "auto"}}})");
  Config c = accepted(doc);
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_DOUBLE_EQ(c.optimizer.lr(), 5e-5);
  EXPECT_DOUBLE_EQ(c.optimizer.params.pair("betas")[0], 0.9);
  EXPECT_DOUBLE_EQ(c.optimizer.params.pair("betas")[1], 0.999);
  EXPECT_DOUBLE_EQ(c.optimizer.params.number("eps"), 1e-8);
  EXPECT_DOUBLE_EQ(c.optimizer.params.number("weight_decay"), 0.0);  // not AdamW's own default 0.01
  EXPECT_DOUBLE_EQ(c.scheduler.warmup_max_lr, 5e-5);  // follows the resolved lr
  EXPECT_EQ(c.scheduler.warmup_num_steps, 0);
  EXPECT_TRUE(has_note(c, "auto: gradient_clipping = 1.0, the default of Hugging Face's "
                          "--max_grad_norm"));
  EXPECT_TRUE(has_note(c, "auto: optimizer.params.lr = 5e-05, the default of Hugging Face's "
                          "--learning_rate"));
  EXPECT_TRUE(has_note(c, "auto: optimizer.params.weight_decay = 0.0"));
  EXPECT_TRUE(has_note(c, "auto: scheduler.params.warmup_num_steps = 0"));
  // The --set a note names, followed literally, replaces the default.
  for (const auto& n : c.notes) {
    if (n.starts_with("auto: optimizer.params.lr")) {
      EXPECT_NE(n.find("--set optimizer.params.lr=0.0001"), std::string::npos) << n;
    }
  }
  apply_override(doc, "optimizer.params.lr=0.0001");
  apply_override(doc, "optimizer.params.betas=[0.9, 0.95]");
  c = accepted(doc);
  EXPECT_DOUBLE_EQ(c.optimizer.lr(), 1e-4);
  EXPECT_DOUBLE_EQ(c.scheduler.warmup_max_lr, 1e-4);
  EXPECT_DOUBLE_EQ(c.optimizer.params.pair("betas")[1], 0.95);
}

// "auto" precision is chosen by the device at start-up (train::resolve_device, tested in
// test_train's DeviceChoice): off until then, kept as "auto" in the resolved config.
TEST(HuggingFaceAuto, PrecisionFollowsTheDevice) {
  json doc = json::parse(R"({"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": "auto"},
      "bf16": {"enabled": "auto"}})");
  Config c = accepted(doc);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_TRUE(c.fp16.automatic && c.bf16.automatic);
  EXPECT_TRUE(has_note(c, "auto: fp16.enabled follows the device at start-up"));
  apply_override(doc, "bf16.enabled=true");
  c = accepted(doc);
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_FALSE(c.fp16.automatic || c.bf16.automatic);  // a value given wins over "auto"
}

TEST(HuggingFaceAuto, ZeroBucketsFromTheModelWidth) {
  const json base = json::parse(R"({"train_micro_batch_size_per_gpu": 2,
      "zero_optimization": {"reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
          "stage3_param_persistence_threshold": "auto"},
      "strata": {"model": {"n_embd": 256, "n_head": 4}}})");
  json stage3 = base;
  stage3["zero_optimization"]["stage"] = 3;
  Config c = accepted(stage3);
  EXPECT_EQ(c.zero_optimization.stage3_prefetch_bucket_size, 58982);  // 0.9 × 256²
  EXPECT_EQ(c.zero_optimization.stage3_param_persistence_threshold, 2560);
  EXPECT_TRUE(has_note(c, "ignored: zero_optimization.reduce_bucket_size=\"auto\""));
  c = accepted(base);  // stage 0: the all-reduce buckets are n_embd², the stage-3 keys unused
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 65536);
  EXPECT_TRUE(has_note(c, "ignored: zero_optimization.stage3_prefetch_bucket_size=\"auto\""));
}

TEST(HuggingFaceAuto, OtherKeysAndStringsKeepTheirMeaning) {
  Problems p;
  check_config(json::parse(R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": "auto",
      "strata": {"checkpoint": {"resume": "auto"}}})"),
               p);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p.list()[0].text.find("steps_per_print is \"auto\", which Strata resolves only"),
            std::string::npos);
  EXPECT_NE(p.list()[0].text.find("--set steps_per_print=10"), std::string::npos);
}

TEST(DeepSpeedNames, OldNamesAreReadAsTheCurrentOnes) {
  const Config c = accepted(json::parse(R"({"train_micro_batch_size_per_gpu": 2,
      "bfloat16": {"enabled": true}, "aio": {"intra_op_parallelism": 4},
      "zero_optimization": {"stage": 3, "cpu_offload": true, "cpu_offload_param": true}})"));
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_EQ(c.aio.thread_count, 4);
  EXPECT_EQ(c.zero_optimization.offload_optimizer.device, OffloadDevice::cpu);
  EXPECT_EQ(c.zero_optimization.offload_param.device, OffloadDevice::cpu);
  EXPECT_TRUE(has_note(c, "read bfloat16 as bf16"));
  EXPECT_TRUE(has_note(c,
                       "read zero_optimization.cpu_offload=true as "
                       "zero_optimization.offload_optimizer.device \"cpu\""));
  EXPECT_TRUE(has_note(c, "read aio.intra_op_parallelism as aio.thread_count"));
}

// A no-op must really change nothing: the resolved config is the same without the keys.
TEST(DeepSpeedNoOps, ChangeNothingAndAreNotedOnceEach) {
  const json plain = json::parse(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
      "zero_optimization": {"stage": 3}})");
  const json noops = json::parse(R"({"train_micro_batch_size_per_gpu": 2,
      "zero_allow_untested_optimizer": true, "comet": {"enabled": false, "project": "x"},
      "compression_training": {"weight_quantization": {"shared_parameters": {"enabled": false}}},
      "checkpoint": {"tag_validation": "Fail", "load_universal": false},
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": true,
          "adam_w_mode": true}},
      "zero_optimization": {"stage": 3, "sub_group_size": 1e9, "contiguous_gradients": true,
          "stage3_gather_16bit_weights_on_model_save": true}})");
  const Config a = accepted(plain), b = accepted(noops);
  EXPECT_EQ(to_json(a), to_json(b));
  EXPECT_TRUE(a.notes.empty());
  EXPECT_EQ(b.notes.size(), 10u);
  const std::set<std::string> unique(b.notes.begin(), b.notes.end());
  EXPECT_EQ(unique.size(), b.notes.size());
  for (const auto& n : b.notes) EXPECT_TRUE(n.starts_with("ignored: ")) << n;
}

TEST(DeepSpeedNoOps, UnusedAtThisStage) {
  const Config c = accepted(json::parse(R"({"train_micro_batch_size_per_gpu": 2,
      "zero_optimization": {"stage": 2, "stage3_max_live_parameters": 1e8,
          "reduce_bucket_size": 0}})"));
  EXPECT_TRUE(has_note(c,
                       "ignored: zero_optimization.stage3_max_live_parameters=100000000.0 at "
                       "stage 2: it applies only at stage 3"));
  EXPECT_TRUE(has_note(c, "ignored: zero_optimization.reduce_bucket_size=0 at stage 2"));
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500'000'000);  // 0 reaches no bucketing code
}

TEST(ConfigProblems, EveryProblemAtOnceOneLineEach) {
  const json doc = json::parse(R"({"train_micro_batch_size_per_gpu": 4,
      "zero_optimization": {"stgae": 2, "stage": 3, "offload_param": {"device": "nvm"}},
      "fp16": {"enabled": true, "loss_scale": -1}, "sparse_attention": {"mode": "fixed"},
      "optimizer": {"type": "AdamW", "params": {"lr": "auto", "amsgrad": true}},
      "steps_per_print": "auto",
      "strata": {"model": {"n_embd": 100, "n_head": 3}}})");
  Problems p;
  check_config(doc, p);
  std::vector<std::string> keys;
  for (const auto& x : p.list()) keys.push_back(x.key);
  const std::vector<std::string> expected{
      "steps_per_print",  // "auto" first: resolved before the structure is read
      "sparse_attention",
      "zero_optimization.stgae",
      "fp16.loss_scale",
      "optimizer.params.amsgrad",
      "zero_optimization.offload_param.device",
      "strata.model.n_embd"};
  EXPECT_EQ(keys, expected);
  try {
    parse_config(doc, "my.json");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.lines().size(), expected.size());
    for (const auto& l : e.lines()) EXPECT_TRUE(l.starts_with("my.json: ")) << l;
    const std::string what = e.what();
    EXPECT_EQ(std::count(what.begin(), what.end(), '\n') + 1,
              static_cast<std::ptrdiff_t>(expected.size()));
    EXPECT_TRUE(what.starts_with("[config] my.json: "));
  }
}

TEST(DeepSpeedKeys, TableIsConsistent) {
  std::set<std::string> seen;
  for (const auto& row : deepspeed_key_rows()) {
    EXPECT_TRUE(seen.insert(row.key).second) << "duplicate " << row.key;
    EXPECT_FALSE(row.noop_values.empty()) << row.key;
    EXPECT_FALSE(row.otherwise.empty()) << row.key;
  }
  for (const auto& path : seen) {
    if (path.find(' ') != std::string::npos) continue;  // optimizer types, params with types
    const DeepSpeedKey* k = find_deepspeed_key(path);
    if (!k) k = find_scheduler_param(path.substr(path.rfind('.') + 1));
    ASSERT_NE(k, nullptr) << path;
    EXPECT_EQ(find_key(path), nullptr) << path << " is Strata's own key too";
    const auto dot = path.rfind('.');
    if (dot != std::string::npos) {
      const std::string parent = path.substr(0, dot);
      EXPECT_TRUE(find_key(parent) || find_deepspeed_key(parent)) << path;
    }
    EXPECT_FALSE(k->why.empty() && k->what.empty()) << path;
    EXPECT_EQ(k->what.empty(), k->fix.empty()) << path;
  }
}

TEST(DeepSpeedKeys, DocsListEveryOne) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const auto& r : deepspeed_key_rows()) {
    const std::string line = fmt::format("| `{}` | {} | {} |", r.key, r.noop_values, r.otherwise);
    EXPECT_NE(doc.find(line), std::string::npos)
        << "docs/config.md lacks (or has an old version of) " << line
        << "; regenerate it with `strata config keys --deepspeed --markdown`";
  }
  // And the other way round: the table's rows are all generated ones (no stale row stays behind
  // once a feature is implemented).
  std::set<std::string> rows;
  for (const auto& r : deepspeed_key_rows())
    rows.insert(fmt::format("| `{}` | {} | {} |", r.key, r.noop_values, r.otherwise));
  const std::size_t table = doc.find("| DeepSpeed key | accepted (ignored, with a note) at |");
  ASSERT_NE(table, std::string::npos);
  std::istringstream lines(doc.substr(table));
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // rule
  while (std::getline(lines, line) && line.starts_with("| "))
    EXPECT_TRUE(rows.count(line)) << "docs/config.md has a row no longer generated: " << line;
}

}  // namespace
}  // namespace strata::config
