#include "parallel/plan/report.hpp"

#include <fmt/format.h>

#include "framework/memory/size.hpp"

namespace strata::parallel::plan {

namespace {
constexpr Tier kTiers[] = {Tier::device, Tier::host, Tier::nvme};
}

std::string format_plan(const MemoryPlan& p) {
  std::string out = fmt::format("{:<8} {:<13} {:>12}\n", "tier", "category", "peak");
  for (const Tier t : kTiers) {
    const int ti = static_cast<int>(t);
    const auto& cap = p.caps[ti];
    if (p.peak(t) == 0 && !cap) continue;
    for (std::size_t c = 0; c < kNumCategories; ++c)
      if (p.memory.peak[ti][c] > 0)
        out += fmt::format("{:<8} {:<13} {:>12}\n", tier_name(t),
                           category_name(static_cast<Category>(c)),
                           format_bytes(p.memory.peak[ti][c]));
    out += fmt::format("{:<8} {:<13} {:>12}{}\n", tier_name(t), "total", format_bytes(p.peak(t)),
                       cap ? fmt::format("   (cap {}: {})", format_bytes(*cap),
                                         p.fits(t) ? "fits" : "does NOT fit")
                           : "");
  }
  return out;
}

nlohmann::json plan_json(const MemoryPlan& p) {
  nlohmann::json peak = nlohmann::json::object(), by = nlohmann::json::object(),
                 caps = nlohmann::json::object();
  for (const Tier t : kTiers) {
    const int ti = static_cast<int>(t);
    const std::string name(tier_name(t));
    peak[name] = p.peak(t);
    nlohmann::json cats = nlohmann::json::object();
    for (std::size_t c = 0; c < kNumCategories; ++c)
      cats[std::string(category_name(static_cast<Category>(c)))] = p.memory.peak[ti][c];
    by[name] = std::move(cats);
    caps[name] = p.caps[ti] ? nlohmann::json(*p.caps[ti]) : nlohmann::json(nullptr);
  }
  return {{"ranks", p.ranks},
          {"micro_batch", p.micro_batch},
          {"gradient_accumulation_steps", p.accumulation},
          {"peak", peak},
          {"by_category", by},
          {"caps", caps},
          {"fits", p.fits()}};
}

std::string format_recommendation(const Recommendation& r, const config::Config& cfg) {
  std::string out = fmt::format("{:<42} {:<9} {:>13} {:>12} {:>12} {:>12} {:<5} {}\n", "option",
                                "recompute", "micro x accum", "device", "host", "nvme", "fits",
                                "cost (estimate)");
  for (std::size_t i = 0; i < r.options.size(); ++i) {
    const Option& o = r.options[i];
    const std::string mark = r.chosen == i ? "* " : "  ";
    if (!o.skipped.empty()) {
      if (o.recompute != config::Recompute::none || o.sequence_parallel)
        continue;  // one line per skipped rung
      out += fmt::format("{}{:<40} skipped: {}\n", mark, o.rung, o.skipped);
      continue;
    }
    if (!o.trial) continue;
    const MemoryPlan& p = o.trial->plan;
    const std::string name = o.sequence_parallel ? o.rung + " + sequence parallel" : o.rung;
    out += fmt::format("{}{:<40} {:<9} {:>13} {:>12} {:>12} {:>12} {:<5} x{:.2f}\n", mark, name,
                       config::to_string(o.recompute),
                       fmt::format("{} x {}", p.micro_batch, p.accumulation),
                       format_bytes(p.peak(Tier::device)), format_bytes(p.peak(Tier::host)),
                       format_bytes(p.peak(Tier::nvme)), o.trial->fits() ? "yes" : "no",
                       o.relative);
  }
  const CostModel& m = r.model;
  out += fmt::format(
      "cost: an estimate relative to the cheapest option that fits (per step: 6 x params x tokens "
      "at {:g} TFLOP/s, efficiency t/(t+{:g}) for t tokens per micro-batch, x{:g} with "
      "selective and x4/3 with full recomputation; collectives at {:g} GB/s; host transfers at {:g} GB/s; NVMe at {:g} GB/s; "
      "docs/plan.md)\n",
      m.flops / 1e12, m.half_tokens, 1 + m.selective_overhead, m.network / 1e9, m.pcie / 1e9, m.nvme / 1e9);
  if (!r.chosen) {
    out += "no option fits these caps: raise a cap, or add ranks\n";
    return out;
  }
  const Option& c = r.options[*r.chosen];
  out += fmt::format("recommended: {}{}, activation recomputation {}, micro-batch {} x "
                     "accumulation {} (global batch {} kept)\n  {}\n",
                     c.rung, c.sequence_parallel ? ", sequence parallelism on" : "",
                     config::to_string(c.recompute), c.trial->plan.micro_batch,
                     c.trial->plan.accumulation, cfg.train_batch_size, c.trial->change.flags());
  return out;
}

std::string format_plan_report(const MemoryPlan& plan, const config::Config& cfg) {
  return fmt::format(
             "memory plan per rank: {} rank{}, micro-batch {} x accumulation {}, ZeRO stage {}{}{}\n",
             plan.ranks, plan.ranks == 1 ? "" : "s", plan.micro_batch, plan.accumulation,
             cfg.zero_optimization.stage,
             cfg.strata.activation_checkpointing == config::Recompute::full
                 ? ", activation checkpointing"
             : cfg.strata.activation_checkpointing == config::Recompute::selective
                 ? ", selective activation recomputation"
                 : "",
             cfg.strata.sequence_parallel
                 ? fmt::format(", sequence parallel over tp {}", cfg.strata.tensor_parallel_size)
                 : "") +
         format_plan(plan) + (plan.fits() ? "fits the caps\n" : "does NOT fit the caps\n");
}

nlohmann::json recommendation_json(const Recommendation& r) {
  nlohmann::json opts = nlohmann::json::array();
  for (std::size_t i = 0; i < r.options.size(); ++i) {
    const Option& o = r.options[i];
    // As the config writes it: false, "selective" or true.
    const nlohmann::json mode = o.recompute == config::Recompute::selective
                                    ? nlohmann::json("selective")
                                    : nlohmann::json(o.recompute == config::Recompute::full);
    nlohmann::json j = {{"option", o.rung}, {"activation_checkpointing", mode},
                        {"sequence_parallel", o.sequence_parallel}};
    if (!o.skipped.empty()) j["skipped"] = o.skipped;
    if (o.trial) {
      j["plan"] = plan_json(o.trial->plan);
      j["flags"] = o.trial->change.flags();
      j["sets"] = o.trial->change.sets;
      j["relative_cost"] = o.relative;
      j["cost_seconds"] = {{"compute", o.cost.compute}, {"comm", o.cost.comm},
                           {"host", o.cost.host}, {"nvme", o.cost.nvme}};
    }
    j["chosen"] = r.chosen == i;
    opts.push_back(std::move(j));
  }
  return {{"options", opts}, {"chosen", r.chosen ? nlohmann::json(*r.chosen) : nlohmann::json(nullptr)}};
}

}  // namespace strata::parallel::plan
