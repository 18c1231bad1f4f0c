#include "parallel/plan/oom_advice.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "framework/memory/size.hpp"
#include "parallel/plan/cost.hpp"

namespace strata::parallel::plan {

namespace {

using config::OffloadDevice;

// The changes worth trying for a tier, in no particular order (the plans sort them).
std::vector<Trial> candidates(const config::Config& cfg, const Trials& trials, Tier tier) {
  std::vector<Trial> out;
  auto add = [&](std::optional<Trial> t) {
    if (t && t->fits()) out.push_back(std::move(*t));
  };
  auto run = [&](std::string what, std::vector<std::string> sets) {
    add(trials.run(cfg, Change{std::move(what), std::move(sets)}));
  };
  const auto& z = cfg.zero_optimization;
  const auto& oo = z.offload_optimizer;
  const auto& op = z.offload_param;
  const int micro = static_cast<int>(cfg.train_micro_batch_size_per_gpu);
  // Recomputation that keeps less than the config does: selective (no product with a weight
  // redone), then full.
  std::vector<std::pair<std::string, std::string>> recompute;
  if (cfg.strata.activation_checkpointing == config::Recompute::none)
    recompute.emplace_back("turn on selective activation recomputation",
                           "strata.activation_checkpointing=selective");
  if (cfg.strata.activation_checkpointing != config::Recompute::full)
    recompute.emplace_back("turn on activation checkpointing", "strata.activation_checkpointing=true");
  if (tier == Tier::device) {
    for (const auto& [what, set] : recompute) run(what, {set});
    // Tensor parallelism without sequence parallelism keeps every token's LayerNorm and residual
    // activations on each tp rank (an invalid config, e.g. block_size not a multiple of tp, is no
    // candidate: Trials::run).
    if (cfg.strata.tensor_parallel_size > 1 && !cfg.strata.sequence_parallel) {
      run("split the LayerNorm and residual activations over the tensor-parallel ranks "
          "(sequence parallelism)",
          {"strata.sequence_parallel=true"});
      // They compose: the pair where neither alone is enough.
      for (const auto& [what, set] : recompute)
        run("split the LayerNorm and residual activations over the tensor-parallel ranks "
            "(sequence parallelism) and " + what,
            {"strata.sequence_parallel=true", set});
    }
    if (micro > 1) {
      add(trials.largest_micro(cfg, Change{"use smaller micro-batches (same global batch)", {}}, micro));
      for (const auto& [what, set] : recompute)
        add(trials.largest_micro(
            cfg, Change{what + " and use smaller micro-batches (same global batch)", {set}}, micro));
    }
    if (trials.ranks() > 1)  // sharding helps only across several data-parallel ranks
      for (int s = z.stage + 1; s <= 3; ++s)
        run(fmt::format("shard over the data-parallel ranks with ZeRO stage {}", s),
            {fmt::format("zero_optimization.stage={}", s)});
    const std::string stage1 = "zero_optimization.stage=1";
    // (On a GPU as on the CPU; a change a GPU job would refuse is no candidate: Trials::run.)
    if (oo.device == OffloadDevice::none) {
      std::vector<std::string> sets;
      if (z.stage < 1) sets.push_back(stage1);  // optimizer offload needs stage >= 1
      sets.push_back("zero_optimization.offload_optimizer.device=cpu");
      run("keep optimizer state in host memory", sets);
    }
    if (op.device == OffloadDevice::none) {
      std::vector<std::string> sets;
      if (z.stage != 3) sets.push_back("zero_optimization.stage=3");  // parameter offload: stage 3
      sets.push_back("zero_optimization.offload_param.device=cpu");
      if (oo.device == OffloadDevice::none)
        sets.push_back("zero_optimization.offload_optimizer.device=cpu");
      run("keep parameters and optimizer state in host memory", sets);
    }
    if (z.stage == 3 && (z.stage3_max_reuse_distance > 0 || z.stage3_prefetch_bucket_size > 0))
      run("release each gathered parameter unit after its use, without prefetch",
          {"zero_optimization.stage3_max_reuse_distance=0",
           "zero_optimization.stage3_prefetch_bucket_size=0"});
    if ((z.stage == 1 || z.stage == 2) && trials.ranks() > 1 && z.allgather_bucket_size > 1)
      run("gather updated parameters one unit at a time", {"zero_optimization.allgather_bucket_size=1"});
  } else if (tier == Tier::host) {
    // Back onto the device (useful where the device has room: the plan checks every cap).
    if (oo.device == OffloadDevice::cpu)
      run("keep optimizer state on the device", {"zero_optimization.offload_optimizer.device=none"});
    if (op.device == OffloadDevice::cpu)
      run("keep parameters on the device", {"zero_optimization.offload_param.device=none"});
    if (oo.device == OffloadDevice::cpu && !oo.nvme_path.empty())
      run("keep optimizer state on NVMe", {"zero_optimization.offload_optimizer.device=nvme"});
    if (op.device == OffloadDevice::cpu && !op.nvme_path.empty())
      run("keep parameters on NVMe", {"zero_optimization.offload_param.device=nvme"});
    if (oo.device == OffloadDevice::nvme && oo.buffer_count > 2)
      run("use 2 staging buffers for optimizer state",
          {"zero_optimization.offload_optimizer.buffer_count=2"});
    if (op.device == OffloadDevice::nvme && op.buffer_count > 2)
      run("use 2 staging buffers for parameters", {"zero_optimization.offload_param.buffer_count=2"});
  }
  return out;
}

std::string describe_trial(const Trial& t, Tier tier, double base_cost) {
  const auto& cap = t.plan.caps[static_cast<int>(tier)];
  const double rel = base_cost > 0 ? estimate(t.plan).total() / base_cost : 1.0;
  return fmt::format("{}: {} (planned peak {} of the {} {} cap; estimated step time x{:.2f})",
                     t.change.what, t.change.flags(), format_bytes_ceil(t.plan.peak(tier)),
                     cap ? format_bytes(*cap) : std::string("unlimited"), tier_name(tier), rel);
}

}  // namespace

OomAdvice plan_advice(const config::Config& cfg, int ranks, const ModelFactory& model, Tier tier,
                      const Caps& caps) {
  const Trials trials(model, ranks, caps);
  OomAdvice out;
  const auto current = trials.run(cfg, Change{"as configured", {}});
  STRATA_CHECK(current, "plan", "the running config does not parse back");
  const std::uint64_t need = current->plan.peak(tier);
  out.step_needs = need;
  const double base = estimate(current->plan).total();
  std::vector<Trial> fit = candidates(cfg, trials, tier);
  std::stable_sort(fit.begin(), fit.end(), [](const Trial& a, const Trial& b) {
    return estimate(a.plan).total() < estimate(b.plan).total();
  });
  if (fit.size() > 3) fit.resize(3);
  for (const Trial& t : fit) {
    out.changes.push_back(describe_trial(t, tier, base));
    out.sets.push_back(t.change.sets);
  }
  // More memory: enough for the whole step, when the other tiers fit as they are.
  bool others_fit = true;
  for (const Tier t : {Tier::device, Tier::host, Tier::nvme})
    if (t != tier) others_fit = others_fit && current->plan.fits(t);
  if (others_fit) {
    Change more{fmt::format("give the {} tier the whole step's need", tier_name(tier)),
                {fmt::format("strata.memory.{}_limit={}", tier_name(tier), size_arg(need))}};
    out.changes.push_back(fmt::format("{}: {} (strata.memory.{}_limit)", more.what, more.flags(),
                                      tier_name(tier)));
    out.sets.push_back(more.sets);
  }
  return out;
}

namespace {
thread_local bool advising = false;  // the planner's own allocations must not ask it again
}

OomAdvisor planned_oom_advisor(config::Config cfg, int ranks, ModelFactory model) {
  struct Memo {
    std::mutex mu;
    std::map<std::pair<int, Caps>, OomAdvice> done;
  };
  auto memo = std::make_shared<Memo>();
  return [cfg = std::move(cfg), ranks, model = std::move(model), memo](const OomContext& ctx) {
    if (advising) return default_oom_advice(ctx);
    const auto key = std::pair{static_cast<int>(ctx.tier), ctx.snapshot.cap};
    {
      std::lock_guard lk(memo->mu);
      if (auto it = memo->done.find(key); it != memo->done.end()) return it->second;
    }
    advising = true;
    OomAdvice a;
    try {
      a = plan_advice(cfg, ranks, model, ctx.tier, ctx.snapshot.cap);
    } catch (const std::exception& e) {
      a = default_oom_advice(ctx);
      a.changes.push_back(fmt::format("(the memory planner could not plan this config: {})", e.what()));
    }
    advising = false;
    std::lock_guard lk(memo->mu);
    memo->done.emplace(key, a);
    return a;
  };
}

}  // namespace strata::parallel::plan
