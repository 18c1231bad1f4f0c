#include "launcher/job/run_summary.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "framework/checkpoint/durable_fs.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/size.hpp"
#include "framework/train/from_config.hpp"
#include "offload/factory.hpp"
#include "parallel/zero/zero_memory.hpp"

namespace strata::job {

namespace fs = std::filesystem;

std::string resolve_log_dir(const std::string& flag, const std::string& metrics,
                            const config::Config& cfg) {
  if (!flag.empty()) return flag;
  if (const char* p = std::getenv("STRATA_PROGRESS_DIR"); p && *p) {
    const fs::path progress = fs::path(p).lexically_normal();
    const fs::path dir = progress.filename().empty() ? progress.parent_path() : progress;
    if (dir.filename() == "progress") return dir.parent_path().string();
  }
  if (!metrics.empty()) {
    const std::string d = fs::path(metrics).parent_path().string();
    return d.empty() ? "." : d;
  }
  return cfg.strata.checkpoint.dir;
}

std::string write_resolved_config(const std::string& dir, const config::Config& cfg) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) user_fail("train_gpt", "cannot create the log folder {}: {}", dir, ec.message());
  const std::string path = (fs::path(dir) / kResolvedConfigFile).string();
  checkpoint::write_file_atomic(path, config::to_json(cfg).dump(2) + "\n");
  return path;
}

std::string run_summary(const SummaryInputs& in) {
  const config::Config& cfg = in.job.config();
  const auto& g = in.job.grid();
  const auto& m = in.model;
  const nn::ParamStore& store = in.job.store();
  const auto& ledger = in.job.ledger();
  const train::Precision prec = train::precision_of(cfg);
  const int stage = cfg.zero_optimization.stage;
  std::string s;
  s += fmt::format(
      "world      {} rank{} (dp {} x tp {} x pp {}) over {}, {} compute thread{} each\n",
      g.world().size(), g.world().size() == 1 ? "" : "s", g.dp_size(), g.tp_size(), g.pp_size(),
      g.world().transport(), in.threads, in.threads == 1 ? "" : "s");
  const std::int64_t held = store.total_numel();
  s += fmt::format("model      GPT-2 {} layers, {} heads, d={}, T={}, vocab {}: {} parameters{}, {}\n",
                   m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size, m.num_parameters(),
                   g.pp_size() > 1   ? fmt::format(" ({} in rank 0's pipeline stage)", held)
                   : g.tp_size() > 1 ? fmt::format(" ({} in rank 0's tensor-parallel part)", held)
                                     : "",
                   train::precision_name(prec));
  const std::int64_t T = m.block_size;
  s += fmt::format(
      "batch      {} micro x {} accumulation x {} dp = {} sequences ({} tokens) per "
      "step; {} steps\n",
      cfg.train_micro_batch_size_per_gpu, cfg.gradient_accumulation_steps, g.dp_size(),
      cfg.train_batch_size, cfg.train_batch_size * T, cfg.strata.train_steps);
  std::string opt =
      fmt::format("optimizer  {} lr {:g}", cfg.optimizer.type, cfg.optimizer.lr());
  if (cfg.scheduler.type != config::SchedulerType::none)
    opt += fmt::format(", {}", config::to_string(cfg.scheduler.type));
  if (cfg.gradient_clipping > 0)
    opt += fmt::format(", gradient clipping {:g}", cfg.gradient_clipping);
  s += opt + "\n";
  s += fmt::format("           optimizer state {}\n", in.job.optimizer_state_description());
  s += fmt::format("zero       stage {}; offload: {}\n", stage, offload::describe(cfg));
  if (const auto& vs = store.options().value_store)
    s += fmt::format("           parameter slices (rank 0): {}\n", vs->where());

  const parallel::ModelStateBytes got = in.job.measured_model_states();
  const parallel::ModelStateBytes pred = in.job.predicted_model_states();
  s += fmt::format("memory     model states per rank, measured on the device: {}\n",
                   parallel::describe(got));
  s += fmt::format("           ZeRO-{} prediction (without offload):      {}\n", stage,
                   parallel::describe(pred));
  for (const Tier t : {Tier::host, Tier::nvme}) {
    const auto p = ledger.current(t, Category::params), o = ledger.current(t, Category::optimizer);
    const auto g = ledger.current(t, Category::grads);
    if (p + g + o > 0)
      s += fmt::format("           offloaded to {}: params {}, grads {}, optimizer {}\n",
                       tier_name(t), format_bytes(p), format_bytes(g), format_bytes(o));
  }
  std::string caps;
  for (const auto& [name, cap] : {std::pair{"device", cfg.strata.memory.device_limit},
                                  std::pair{"host", cfg.strata.memory.host_limit},
                                  std::pair{"nvme", cfg.strata.memory.nvme_limit}})
    if (cap) caps += fmt::format("{}{} {}", caps.empty() ? "" : ", ", name, format_bytes(*cap));
  if (!caps.empty()) s += fmt::format("           caps: {}\n", caps);
  s += in.config_file.empty()
           ? std::string(
                 "config     resolved config not saved (no log folder: pass --log-dir "
                 "DIR, or see it with `strata config check`)\n")
           : fmt::format("config     resolved config: {}\n", in.config_file);
  return s;
}

}  // namespace strata::job
