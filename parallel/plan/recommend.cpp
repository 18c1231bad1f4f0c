#include "parallel/plan/recommend.hpp"

#include <fmt/format.h>

#include <limits>

#include "framework/core/error.hpp"
#include "parallel/engine/training.hpp"

namespace strata::parallel::plan {

namespace {

struct Rung {
  std::string name;
  int stage;
  const char* optimizer;  // offload_optimizer.device
  const char* param;      // offload_param.device
  bool shards;            // helps only by sharding over data-parallel ranks
};

}  // namespace

Recommendation recommend(const config::Config& cfg, int ranks, const ModelFactory& model,
                         const Caps& caps, const CostModel& cost) {
  const Trials trials(model, ranks, caps);
  const auto& z = cfg.zero_optimization;
  const std::string nvme_path = !z.offload_optimizer.nvme_path.empty() ? z.offload_optimizer.nvme_path
                                                                       : z.offload_param.nvme_path;
  const bool one = cfg.data_parallel_size <= 1 && ranks <= 1;
  const std::vector<Rung> ladder = {
      {"no ZeRO", 0, "none", "none", false},
      {"ZeRO-1", 1, "none", "none", true},
      {"ZeRO-2", 2, "none", "none", true},
      // On one rank stage 2 only adds transient gradient buffers: stage 1 carries the offload.
      {one ? "ZeRO-1 + optimizer offload" : "ZeRO-2 + optimizer offload", one ? 1 : 2, "cpu", "none", false},
      {"ZeRO-3", 3, "none", "none", true},
      {"ZeRO-3 + optimizer offload", 3, "cpu", "none", true},
      {"ZeRO-3 + optimizer and parameter offload", 3, "cpu", "cpu", false},
      {"ZeRO-3 + NVMe offload", 3, "nvme", "nvme", false},
  };
  Recommendation r;
  r.model = cost;
  for (const Rung& rung : ladder) {
    std::vector<std::string> sets = {
        fmt::format("zero_optimization.stage={}", rung.stage),
        fmt::format("zero_optimization.offload_optimizer.device={}", rung.optimizer),
        fmt::format("zero_optimization.offload_param.device={}", rung.param)};
    std::string skipped;
    if (rung.shards && one) skipped = "shards nothing on one rank";
    if (skipped.empty() && cfg.strata.device == DeviceType::cuda) {
      // What a GPU job would refuse (an optimizer without CUDA kernels keeping its state there).
      config::Config c = cfg;
      c.zero_optimization.stage = rung.stage;
      c.zero_optimization.offload_optimizer.device =
          std::string(rung.optimizer) == "none" ? config::OffloadDevice::none
          : std::string(rung.optimizer) == "cpu" ? config::OffloadDevice::cpu
                                                  : config::OffloadDevice::nvme;
      if (const std::string why = gpu_refusal(c); !why.empty()) skipped = "a GPU job refuses " + why;
    }
    if (std::string(rung.optimizer) == "nvme") {
      if (nvme_path.empty())
        skipped = "needs an NVMe directory: set zero_optimization.offload_optimizer.nvme_path";
      else {
        sets.push_back("zero_optimization.offload_optimizer.nvme_path=" + nvme_path);
        sets.push_back("zero_optimization.offload_param.nvme_path=" + nvme_path);
      }
    }
    // Sequence parallelism as an option of its own where tensor parallelism runs without it (it
    // needs block_size to split over the tp ranks), with each recomputation mode: they compose
    // (docs/parallelism.md).
    std::vector<bool> sp_options{false};
    const std::int64_t tp = cfg.strata.tensor_parallel_size;
    if (tp > 1 && !cfg.strata.sequence_parallel && cfg.strata.model.block_size % tp == 0)
      sp_options.push_back(true);
    using config::Recompute;
    constexpr Recompute kModes[] = {Recompute::none, Recompute::selective, Recompute::full};
    const std::size_t rung_begin = r.options.size();
    for (const Recompute mode : kModes)
      for (const bool sp : sp_options) {
        Option o;
        o.rung = rung.name;
        o.recompute = mode;
        o.sequence_parallel = sp;
        o.skipped = skipped;
        if (skipped.empty()) {
          std::vector<std::string> s = sets;
          s.push_back(fmt::format("strata.activation_checkpointing={}",
                                  mode == Recompute::none   ? "false"
                                  : mode == Recompute::full ? "true"
                                                            : "selective"));
          if (sp) s.push_back("strata.sequence_parallel=true");
          const Change ch{rung.name, s};
          try {
            o.trial = trials.largest_micro(cfg, ch);
            if (!o.trial) {  // nothing fits: show the smallest step's need
              Change smallest = ch;
              const std::int64_t samples =
                  cfg.train_micro_batch_size_per_gpu *
                  std::max<std::int64_t>(1, cfg.gradient_accumulation_steps);
              smallest.sets.push_back("train_micro_batch_size_per_gpu=1");
              smallest.sets.push_back(fmt::format("gradient_accumulation_steps={}", samples));
              o.trial = trials.run(cfg, smallest);
            }
          } catch (const UserError& e) {
            // The job refuses this rung's settings (an optimizer that refuses ZeRO, say): the rung
            // is not an option, and the others still are.
            o.trial.reset();
            o.skipped = fmt::format("the job refuses it: {}", e.what());
          }
          if (o.trial) o.cost = estimate(o.trial->plan, cost);
        }
        r.options.push_back(std::move(o));
      }
    // The first rung with a fitting option: its cheapest. Later rungs are slower by DeepSpeed's
    // order and are not planned.
    for (std::size_t i = rung_begin; i < r.options.size(); ++i) {
      const Option& o = r.options[i];
      if (!o.trial || !o.trial->fits()) continue;
      if (!r.chosen || o.cost.total() < r.options[*r.chosen].cost.total()) r.chosen = i;
    }
    if (r.chosen) break;
  }
  double base = std::numeric_limits<double>::infinity();
  for (const Option& o : r.options)
    if (o.trial && (o.trial->fits() || !r.chosen)) base = std::min(base, o.cost.total());
  for (Option& o : r.options)
    if (o.trial && base > 0) o.relative = o.cost.total() / base;
  return r;
}

}  // namespace strata::parallel::plan
