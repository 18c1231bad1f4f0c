// strata plan: every rank's peak memory per tier × category for a config, before anything is
// allocated (the memory planner, parallel/plan, runs the config's training steps on the meta
// device), whether it fits the caps, and with --recommend the fastest configuration that fits.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "framework/config/cli_options.hpp"
#include "framework/config/config.hpp"
#include "framework/train/from_config.hpp"
#include "launcher/commands.hpp"
#include "parallel/plan/auto_micro_batch.hpp"
#include "parallel/plan/recommend.hpp"
#include "parallel/plan/report.hpp"

namespace strata::launcher {

namespace {

struct PlanArgs {
  config::ConfigOptions options;
  int ranks = 1;
  bool json = false;
  bool recommend = false;
};

void run_plan(const PlanArgs& a) {
  config::Config cfg = a.options.load();
  // The job as it would run: "auto" device and precision resolved (bf16 halves what f32 holds).
  train::resolve_device_for_plan(cfg);
  const auto model = parallel::plan::gpt_model();  // train_gpt's model (strata.model)
  parallel::plan::resolve_auto_micro_batch(cfg, a.ranks, model);
  config::resolve_batch(cfg, config::data_parallel_size(cfg, a.ranks));
  const parallel::plan::MemoryPlan plan =
      parallel::plan::plan_memory(cfg, model, parallel::plan::PlanOptions{a.ranks, 2});
  std::optional<parallel::plan::Recommendation> rec;
  if (a.recommend)
    rec = parallel::plan::recommend(cfg, a.ranks, model, parallel::plan::caps_of(cfg));
  if (a.json) {
    nlohmann::json j = parallel::plan::plan_json(plan);
    if (rec) j["recommendation"] = parallel::plan::recommendation_json(*rec);
    std::cout << j.dump(2) << "\n";
    return;
  }
  for (const auto& note : cfg.notes)
    std::cerr << fmt::format("strata: note: {}: {}\n", a.options.source(), note);
  std::cout << parallel::plan::format_plan_report(plan, cfg);
  if (rec) std::cout << "\n" << parallel::plan::format_recommendation(*rec, cfg);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan",
      "Predict each rank's peak memory per tier (device, host, nvme) and category for a "
      "train_gpt config before anything is allocated, and whether it fits the caps");
  config::add_config_options(*cmd, args->options, true);
  cmd->add_option("--ranks,-n", args->ranks, "Ranks the job would run on (world size)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--json", args->json,
                "Print {\"ranks\", \"peak\": {tier: bytes}, \"by_category\", \"fits\", ...} as JSON");
  cmd->add_flag("--recommend", args->recommend,
                "Also plan the ZeRO/offload ladder in DeepSpeed's order (without activation "
                "recomputation, selective and full; for a tensor-parallel job without sequence "
                "parallelism, each also with it; largest micro-batch keeping the global batch) and "
                "recommend the fastest option that fits the caps");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace strata::launcher
