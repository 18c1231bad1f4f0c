// Helpers shared by the memory planner's tests: configs of a small GPT from `--set` style
// assignments, and a real (measured) run of a config's training steps on the CPU backend with its
// own ledger, capped as the config says, on a one-rank world.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/config/overrides.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/train/from_config.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/comm/planning.hpp"
#include "parallel/engine/training.hpp"
#include "parallel/plan/planner.hpp"

namespace strata::plan_test {

// A directory for swap files under the system temp dir, removed afterwards.
inline const std::string& nvme_dir() {
  static const std::string dir = [] {
    const auto p = std::filesystem::temp_directory_path() /
                   ("strata-plan-test-" + std::to_string(static_cast<long>(::getpid())));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return dir;
}

// A small GPT config document (AdamW, 2 layers) with the assignments applied ("NVME" in a value
// stands for nvme_dir()).
inline config::json gpt_document(const std::vector<std::string>& sets) {
  config::json doc = config::json::parse(R"({
    "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "strata": {"seed": 3, "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 64,
                                     "block_size": 32, "vocab_size": 64}}})");
  for (const auto& s : sets) {
    std::string v = s;
    const std::string marker = "NVME";
    if (auto at = v.find(marker); at != std::string::npos) v.replace(at, marker.size(), nvme_dir());
    config::apply_override(doc, v);
  }
  return doc;
}

// gpt_document validated, batch resolved for `ranks` ranks.
inline config::Config gpt_config(const std::vector<std::string>& sets, int ranks = 1) {
  config::Config cfg = config::parse_config(gpt_document(sets));
  config::resolve_batch(cfg, ranks);
  return cfg;
}

inline const parallel::Group& one_rank() {
  static const parallel::Group g = [] {
    parallel::InitOptions o;
    o.transport = "local";
    return parallel::init_world(o);
  }();
  return g;
}

// Runs `steps` real training steps of cfg (caps applied to a fresh ledger) and returns the
// ledger's snapshot; throws OutOfMemory when a cap is exceeded (with the memory planner's advice
// when planned_advice, as train_gpt gives it). host_staging: on the CPU, the offload paths of a
// GPU job (TrainingExtras::host_staging).
inline MemorySnapshot measure(const config::Config& cfg, int steps = 2, bool planned_advice = false,
                              bool host_staging = false) {
  MemoryLedger ledger;
  train::apply_memory_caps(cfg, ledger);
  nn::Gpt model(train::gpt_config(cfg));
  parallel::TrainingExtras extras = parallel::TrainingExtras::on(&ledger);
  if (planned_advice) extras.model_factory = parallel::plan::gpt_model();
  extras.host_staging = host_staging;
  parallel::Training job(cfg, one_rank(), model, extras);
  std::int64_t k = 0;
  auto feed = [&](nn::Batch& b) {
    for (const char* f : {"tokens", "targets"}) {
      auto* p = b[f].data<std::int32_t>();
      for (std::int64_t i = 0; i < b[f].numel(); ++i) p[i] = static_cast<std::int32_t>((k + i * 7) % 64);
    }
    ++k;
  };
  for (int s = 0; s < steps; ++s) job.step(feed);
  return ledger.snapshot();
}

}  // namespace strata::plan_test
