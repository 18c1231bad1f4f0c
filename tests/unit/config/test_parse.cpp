// Good configs: defaults, DeepSpeed spellings, dynamic defaults, round trips, the schema's
// documented defaults, the example configs and docs/config.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "framework/config/config.hpp"
#include "framework/config/overrides.hpp"
#include "framework/config/schema.hpp"

namespace strata::config {
namespace {

const json kMinimal = {{"train_micro_batch_size_per_gpu", 4}};

// The value at a dotted path of a JSON document, or nullptr.
const json* at(const json& doc, std::string_view path) {
  const json* cur = &doc;
  while (!path.empty()) {
    const auto dot = path.find('.');
    auto it = cur->find(std::string(path.substr(0, dot)));
    if (it == cur->end()) return nullptr;
    cur = &*it;
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
  }
  return cur;
}

TEST(ConfigParse, MinimalConfigTakesEveryDefault) {
  const Config c = parse_config(kMinimal);
  Config expected;
  expected.train_micro_batch_size_per_gpu = 4;
  EXPECT_EQ(to_json(c), to_json(expected));
  EXPECT_EQ(c.train_batch_size, 0);  // not resolved until the world size is known
  EXPECT_EQ(c.steps_per_print, 10);
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_DOUBLE_EQ(c.optimizer.lr(), 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer.params.number("weight_decay"), 0.01);
  EXPECT_EQ(c.scheduler.type, SchedulerType::none);
  EXPECT_EQ(c.zero_optimization.stage, 0);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500'000'000);
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_TRUE(c.fp16.dynamic());
  EXPECT_EQ(c.aio.block_size, 1048576);
  EXPECT_EQ(c.strata.seed, 1234u);
  EXPECT_FALSE(c.strata.device.has_value());  // "auto"
  EXPECT_FALSE(c.strata.memory.device_limit.has_value());
  EXPECT_EQ(c.strata.checkpoint.resume, "auto");
  EXPECT_DOUBLE_EQ(c.strata.comm.timeout_s, 300);
}

TEST(ConfigParse, ReadsADeepSpeedStyleConfig) {
  const json doc = json::parse(R"({
    "train_batch_size": 64,
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0,
    "steps_per_print": 50,
    "wall_clock_breakdown": false,
    "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 12, "loss_scale_window": 500,
             "hysteresis": 4, "consecutive_hysteresis": true, "min_loss_scale": 2},
    "optimizer": {"type": "adam", "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6,
                  "weight_decay": 0.1, "adam_w_mode": true}},
    "scheduler": {"type": "warmuplr", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-4,
                  "warmup_num_steps": 100, "warmup_type": "linear"}},
    "zero_optimization": {"stage": 3, "contiguous_gradients": false, "reduce_bucket_size": 5e8,
                          "stage3_prefetch_bucket_size": 1e7, "stage3_max_live_parameters": 2e8,
                          "stage3_param_persistence_threshold": 1e4,
                          "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme", "pin_memory": true,
                                                "buffer_count": 8},
                          "offload_param": {"device": "cpu", "pin_memory": true, "nvme_path": null}},
    "aio": {"block_size": 262144, "queue_depth": 32, "thread_count": 2, "single_submit": true,
            "overlap_events": false},
    "checkpoint": {"tag_validation": "fail"}
  })");
  const Config c = parse_config(doc);
  EXPECT_EQ(c.train_batch_size, 64);
  EXPECT_EQ(c.gradient_accumulation_steps, 2);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 0);
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.steps_per_print, 50);
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_EQ(c.fp16.initial_scale_power, 12);
  EXPECT_EQ(c.fp16.loss_scale_window, 500);
  EXPECT_EQ(c.fp16.hysteresis, 4);
  EXPECT_TRUE(c.fp16.consecutive_hysteresis);
  EXPECT_DOUBLE_EQ(c.fp16.min_loss_scale, 2);
  EXPECT_EQ(c.optimizer.type, "Adam");  // DeepSpeed lowercases the type
  EXPECT_DOUBLE_EQ(c.optimizer.lr(), 3e-4);
  EXPECT_DOUBLE_EQ(c.optimizer.params.pair("betas")[0], 0.8);
  EXPECT_DOUBLE_EQ(c.optimizer.params.pair("betas")[1], 0.95);
  EXPECT_DOUBLE_EQ(c.optimizer.params.number("eps"), 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.params.number("weight_decay"), 0.1);
  EXPECT_TRUE(c.optimizer.params.flag("adam_w_mode"));
  EXPECT_EQ(c.scheduler.type, SchedulerType::warmup_lr);
  EXPECT_EQ(c.scheduler.warmup_num_steps, 100);
  EXPECT_EQ(c.scheduler.warmup_type, WarmupType::linear);
  const Zero& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 3);
  EXPECT_TRUE(z.overlap_comm);                   // DeepSpeed's default at stage 3
  EXPECT_EQ(z.reduce_bucket_size, 500'000'000);  // 5e8 is a JSON float with an integral value
  EXPECT_EQ(z.stage3_prefetch_bucket_size, 10'000'000);
  EXPECT_EQ(z.stage3_max_live_parameters, 200'000'000);
  EXPECT_EQ(z.stage3_param_persistence_threshold, 10'000);
  EXPECT_EQ(z.offload_optimizer.device, OffloadDevice::nvme);
  EXPECT_EQ(z.offload_optimizer.nvme_path, "/nvme");
  EXPECT_TRUE(z.offload_optimizer.pin_memory);
  EXPECT_EQ(z.offload_optimizer.buffer_count, 8);
  EXPECT_EQ(z.offload_param.device, OffloadDevice::cpu);
  EXPECT_TRUE(z.offload_param.nvme_path.empty());
  EXPECT_EQ(c.aio.block_size, 262144);
  EXPECT_EQ(c.aio.queue_depth, 32);
  EXPECT_EQ(c.aio.thread_count, 2);
  EXPECT_TRUE(c.aio.single_submit);
  EXPECT_FALSE(c.aio.overlap_events);
  // DeepSpeed keys that change nothing in Strata are accepted and noted, once each.
  const std::vector<std::string> notes{
      "ignored: checkpoint.tag_validation=\"fail\": Strata names checkpoints by step, which every "
      "rank shares, so there is no tag to validate",
      "ignored: zero_optimization.contiguous_gradients=false: Strata keeps every unit's gradients "
      "in one flat buffer whatever it says; the trained numbers do not depend on it",
      "ignored: zero_optimization.reduce_bucket_size=500000000.0 at stage 3: from stage 1 on "
      "Strata reduce-scatters each unit's gradients in one call; the bucket size applies to stage "
      "0's all-reduce only"};
  EXPECT_EQ(c.notes, notes);
}

TEST(ConfigParse, DefaultsThatDependOnOtherKeys) {
  auto with = [](json extra) {
    json doc = kMinimal;
    doc.update(extra);
    return parse_config(doc);
  };
  EXPECT_DOUBLE_EQ(with({{"optimizer", {{"type", "AdamW"}}}}).optimizer.params.number("weight_decay"), 0.01);
  EXPECT_DOUBLE_EQ(with({{"optimizer", {{"type", "Adam"}}}}).optimizer.params.number("weight_decay"), 0.0);
  EXPECT_TRUE(with({{"optimizer", {{"type", "Adam"}}}}).optimizer.params.flag("adam_w_mode"));
  EXPECT_DOUBLE_EQ(with({{"optimizer", {{"type", "SGD"}}}}).optimizer.params.number("weight_decay"), 0.0);
  EXPECT_FALSE(with({{"zero_optimization", {{"stage", 2}}}}).zero_optimization.overlap_comm);
  EXPECT_TRUE(with({{"zero_optimization", {{"stage", 3}}}}).zero_optimization.overlap_comm);
  EXPECT_FALSE(with({{"zero_optimization", {{"stage", 3}, {"overlap_comm", false}}}})
                   .zero_optimization.overlap_comm);
  EXPECT_EQ(with({{"strata", {{"seed", 7}}}}).strata.data.seed, 7u);
  EXPECT_EQ(with({{"strata", {{"seed", 7}, {"data", {{"seed", 9}}}}}}).strata.data.seed, 9u);
}

TEST(ConfigParse, SizesAcceptBytesAndUnits) {
  json doc = kMinimal;
  doc["strata"]["memory"] = {
      {"device_limit", "2GiB"}, {"host_limit", "1.5GB"}, {"nvme_limit", 1048576}};
  const Config c = parse_config(doc);
  EXPECT_EQ(c.strata.memory.device_limit, std::uint64_t{2} << 30);
  EXPECT_EQ(c.strata.memory.host_limit, 1'500'000'000u);
  EXPECT_EQ(c.strata.memory.nvme_limit, 1048576u);
  doc["strata"]["memory"] = {{"device_limit", nullptr}, {"host_limit", "512 MiB"}};
  const Config d = parse_config(doc);
  EXPECT_FALSE(d.strata.memory.device_limit.has_value());
  EXPECT_EQ(d.strata.memory.host_limit, 512u << 20);
}

// strata.activation_checkpointing: true and false as before, or a mode by name (any letter case);
// written back as false, "selective" or true.
TEST(ConfigParse, ActivationCheckpointingModes) {
  const std::pair<json, Recompute> cases[] = {
      {false, Recompute::none},         {true, Recompute::full},
      {"none", Recompute::none},        {"selective", Recompute::selective},
      {"Selective", Recompute::selective}, {"full", Recompute::full}};
  for (const auto& [value, mode] : cases) {
    SCOPED_TRACE(value.dump());
    const Config c = parse_config(json{{"train_micro_batch_size_per_gpu", 1},
                                       {"strata", {{"activation_checkpointing", value}}}});
    EXPECT_EQ(c.strata.activation_checkpointing, mode);
    const json back = to_json(c)["strata"]["activation_checkpointing"];
    EXPECT_EQ(back, mode == Recompute::selective ? json("selective") : json(mode == Recompute::full));
    EXPECT_EQ(parse_config(to_json(c)).strata.activation_checkpointing, mode);
  }
  EXPECT_EQ(parse_config(json{{"train_micro_batch_size_per_gpu", 1}}).strata.activation_checkpointing,
            Recompute::none);
  // On the command line: --set strata.activation_checkpointing=selective (a bare word).
  json doc = {{"train_micro_batch_size_per_gpu", 1}};
  apply_override(doc, "strata.activation_checkpointing=selective");
  EXPECT_EQ(parse_config(doc).strata.activation_checkpointing, Recompute::selective);
  apply_override(doc, "strata.activation_checkpointing=true");
  EXPECT_EQ(parse_config(doc).strata.activation_checkpointing, Recompute::full);
}

TEST(ConfigParse, ToJsonParsesBackToTheSameConfig) {
  const json doc = json::parse(R"({
    "train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
    "bf16": {"enabled": true},
    "optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": true}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 5000, "cos_min_ratio": 0.1}},
    "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/mnt/nvme"}},
    "strata": {"seed": 42, "device": "cuda", "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
               "activation_checkpointing": true, "memory": {"device_limit": "8GiB"},
               "allow_tf32": true, "allow_rounded_attention": true,
               "model": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64, "vocab_size": 256},
               "data": {"train": "a.bin", "valid": "b.bin", "shuffle": false},
               "eval": {"interval": 10, "iters": 5}, "sample": {"tokens": 0, "temperature": 0.8, "top_k": 40},
               "checkpoint": {"dir": "ckpt", "interval": 100, "save_total_limit": 3, "keep_every": 1000,
                              "async": true, "resume": "none"},
               "comm": {"timeout_s": 60}}
  })");
  const Config c = parse_config(doc);
  const json once = to_json(c);
  const json twice = to_json(parse_config(once));
  EXPECT_EQ(once, twice);
  EXPECT_EQ(once["strata"]["memory"]["device_limit"], std::uint64_t{8} << 30);
  EXPECT_EQ(once["scheduler"]["params"]["total_num_steps"], 5000);
  EXPECT_EQ(once["optimizer"]["type"], "SGD");
  // Params of other types are not printed (they would be refused on the way back).
  EXPECT_FALSE(once["optimizer"]["params"].contains("betas"));
  EXPECT_EQ(once["strata"]["device"], "cuda");
  EXPECT_EQ(once["strata"]["allow_tf32"], true);
  EXPECT_EQ(once["strata"]["allow_rounded_attention"], true);
  EXPECT_TRUE(c.strata.allow_rounded_attention);
}

// Every key with a fixed default in the schema (what `strata config keys` and the docs show)
// has that value in to_json of a minimal config, and to_json prints every key.
TEST(ConfigSchema, DocumentedDefaultsAreTheParsedDefaults) {
  std::vector<json> variants;
  for (const char* opt : {"AdamW", "Adam", "SGD", "AdamW8bit", "Adafactor", "Lamb", "OneBitAdam", "OneBitLamb"}) {
    json doc = kMinimal;
    doc["optimizer"]["type"] = opt;
    variants.push_back(to_json(parse_config(doc)));
  }
  for (const char* sched : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}) {
    json doc = kMinimal;
    doc["scheduler"]["type"] = sched;
    if (std::string_view(sched) != "WarmupLR") doc["scheduler"]["params"]["total_num_steps"] = 5000;
    variants.push_back(to_json(parse_config(doc)));
  }
  for (const KeySpec& k : schema()) {
    if (k.kind == Kind::object) continue;
    // The first variant that prints the key (the AdamW, no-scheduler one when it does).
    const json* value = nullptr;
    for (const json& v : variants)
      if ((value = at(v, k.path))) break;
    const bool printed = value != nullptr;
    if (value &&
        json::accept(std::string(k.default_value))) {  // else the default depends on other keys
      const json expected = json::parse(std::string(k.default_value));
      if (expected.is_number())
        EXPECT_DOUBLE_EQ(value->get<double>(), expected.get<double>()) << k.path;
      else
        EXPECT_EQ(*value, expected) << k.path;
    }
    const bool batch_key = std::string_view(k.path).find("batch") != std::string_view::npos ||
                           k.path == "gradient_accumulation_steps";  // printed once resolved
    if (!batch_key) {
      EXPECT_TRUE(printed) << k.path << " is in the schema but to_json never prints it";
    }
  }
}

TEST(ConfigSchema, PathsAreUniqueAndParentsAreObjects) {
  std::set<std::string> seen;
  for (const KeySpec& k : schema()) {
    EXPECT_TRUE(seen.insert(std::string(k.path)).second) << "duplicate " << k.path;
    const auto dot = k.path.rfind('.');
    if (dot == std::string_view::npos) continue;
    const KeySpec* parent = find_key(k.path.substr(0, dot));
    ASSERT_NE(parent, nullptr) << k.path;
    EXPECT_EQ(parent->kind, Kind::object) << k.path;
    EXPECT_FALSE(k.meaning.empty()) << k.path;
  }
}

TEST(ConfigSchema, DocsListEveryKey) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const KeySpec& k : schema()) {
    std::string needle(1, '`');
    needle.append(k.path).push_back('`');
    EXPECT_NE(doc.find(needle), std::string::npos) << k.path << " is not in docs/config.md";
  }
}

TEST(ConfigExamples, EveryExampleConfigIsValid) {
  const std::filesystem::path dir =
      std::filesystem::path(STRATA_SOURCE_DIR) / "examples/gpt/configs";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    Config c = load_config(entry.path().string());
    EXPECT_NO_THROW(resolve_batch(
        c, data_parallel_size(c, c.strata.tensor_parallel_size * c.strata.pipeline_parallel_size)));
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST(ConfigExamples, TinyIsTheSmallGpt) {
  Config c = load_config(std::string(STRATA_SOURCE_DIR) + "/examples/gpt/configs/tiny.json");
  EXPECT_EQ(c.strata.model.n_layer, 4);
  EXPECT_EQ(c.strata.model.n_head, 4);
  EXPECT_EQ(c.strata.model.n_embd, 128);
  EXPECT_EQ(c.strata.model.block_size, 128);
  EXPECT_EQ(c.strata.model.vocab_size, 256);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_DOUBLE_EQ(c.optimizer.lr(), 1e-3);
}

}  // namespace
}  // namespace strata::config
