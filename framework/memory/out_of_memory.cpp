#include "framework/memory/out_of_memory.hpp"

#include "framework/memory/size.hpp"

namespace strata {

namespace {

std::string describe(const OomContext& c, const OomAdvice& advice) {
  const int t = int(c.tier);
  const std::uint64_t in_use = c.snapshot.tier_current[t];
  std::string m;
  if (!c.refused_by.empty()) {
    // Below every cap: the memory itself is full.
    const std::uint64_t reserved = c.snapshot.reserved[t];
    m = fmt::format("out of {} memory: {} refused {} for {}; {} is allocated to storages on the "
                    "{} tier and {} more is reserved ({}).",
                    tier_name(c.tier), c.refused_by, format_bytes(c.requested),
                    category_name(c.category), format_bytes(in_use), tier_name(c.tier),
                    format_bytes(reserved),
                    reserved > 0 ? "free blocks the caching allocators keep but could not give "
                                   "back: parts of segments still in use, or blocks other streams "
                                   "still use"
                                 : "nothing cached");
    if (const auto& cap = c.snapshot.cap[t])
      m += fmt::format(" The {} tier's cap ({}) was not reached: the memory there is less than "
                       "the cap allows (other processes may hold some).",
                       tier_name(c.tier), format_bytes(*cap));
  } else {
    m = fmt::format(
        "out of {} memory: tried to allocate {} for {}; the {} tier is capped at {} and {} is "
        "already in use (short by {}).",
        tier_name(c.tier), format_bytes(c.requested), category_name(c.category),
        tier_name(c.tier), format_bytes(c.cap), format_bytes(in_use),
        format_bytes(in_use + c.requested - std::min(c.cap, in_use + c.requested)));
  }
  if (advice.step_needs)
    m += fmt::format(" A whole training step needs {} of {} memory (the memory planner's peak, "
                     "rounded up), not only this allocation.",
                     format_bytes_ceil(*advice.step_needs), tier_name(c.tier));
  m += fmt::format("\n  in use on {}:", tier_name(c.tier));
  bool any = false;
  for (std::size_t k = 0; k < kNumCategories; ++k) {
    if (c.snapshot.current[t][k] == 0) continue;
    m += fmt::format(" {} {},", category_name(static_cast<Category>(k)),
                     format_bytes(c.snapshot.current[t][k]));
    any = true;
  }
  if (any) m.pop_back();
  else m += " nothing";
  if (!advice.changes.empty()) {
    m += "\n  to make it fit:";
    for (const auto& a : advice.changes) m += "\n    - " + a;
  }
  return m;
}

}  // namespace

OutOfMemory::OutOfMemory(OomContext ctx, OomAdvice advice)
    : Error("memory", describe(ctx, advice)), ctx_(std::move(ctx)), advice_(std::move(advice)) {}

// Without a plan the advisor knows neither the config nor the step: it names the changes that
// act on the large categories, with the conditions under which each is valid, and points at
// `strata plan` for numbers instead of printing one that covers only this allocation.
OomAdvice default_oom_advice(const OomContext& c) {
  OomAdvice out;
  auto& a = out.changes;
  const int t = int(c.tier);
  auto used = [&](Category k) {
    return c.snapshot.current[t][int(k)] + (c.category == k ? c.requested : 0);
  };
  const std::uint64_t total = c.snapshot.tier_current[t] + c.requested;
  const std::uint64_t need = total - std::min(total, c.cap);
  auto big = [&](Category k) { return used(k) > 0 && (used(k) >= need || used(k) * 4 >= total); };
  if (c.tier == Tier::device) {
    if (big(Category::activations))
      a.push_back("lower train_micro_batch_size_per_gpu (raise gradient_accumulation_steps to keep "
                  "the global batch) or turn on strata.activation_checkpointing");
    if (big(Category::optimizer))
      a.push_back("with several data-parallel ranks, shard optimizer state with "
                  "zero_optimization.stage >= 1; or move it off the device with "
                  "zero_optimization.offload_optimizer.device = \"cpu\" (which needs "
                  "zero_optimization.stage >= 1)");
    if (big(Category::grads))
      a.push_back("with several data-parallel ranks, shard gradients with "
                  "zero_optimization.stage >= 2");
    if (big(Category::params))
      a.push_back("store parameters in 16 bits (bf16.enabled or fp16.enabled), or offload them "
                  "with zero_optimization.offload_param.device = \"cpu\" (which needs "
                  "zero_optimization.stage = 3)");
    if (big(Category::comm))
      a.push_back("lower zero_optimization.reduce_bucket_size (stage 0) or "
                  "zero_optimization.allgather_bucket_size (stages 1-2)");
  } else if (c.tier == Tier::host) {
    a.push_back("offload to NVMe instead of host memory (offload_optimizer.device / "
                "offload_param.device = \"nvme\" with an nvme_path) or lower offload buffer_count");
  } else {
    a.push_back("free disk space under nvme_path");
  }
  if (!c.refused_by.empty())
    a.push_back(fmt::format("or free the {} memory other processes hold, or use a machine with "
                            "more: `strata plan --config CONFIG` prints what a whole step needs "
                            "on each tier",
                            tier_name(c.tier)));
  else
    a.push_back(fmt::format("or raise the {} cap (strata.memory.{}_limit): `strata plan --config "
                            "CONFIG` prints what a whole step needs on each tier",
                            tier_name(c.tier), tier_name(c.tier)));
  return out;
}

}  // namespace strata
