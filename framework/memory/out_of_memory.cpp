#include "framework/memory/out_of_memory.hpp"

#include "framework/memory/size.hpp"

namespace strata {

namespace {

std::string describe(const OomContext& c, const std::vector<std::string>& advice) {
  const int t = int(c.tier);
  const std::uint64_t in_use = c.snapshot.tier_current[t];
  std::string m = fmt::format(
      "out of {} memory: tried to allocate {} for {}; the {} tier is capped at {} and {} is "
      "already in use (short by {}).\n  in use on {}:",
      tier_name(c.tier), format_bytes(c.requested), category_name(c.category), tier_name(c.tier),
      format_bytes(c.cap), format_bytes(in_use),
      format_bytes(in_use + c.requested - std::min(c.cap, in_use + c.requested)),
      tier_name(c.tier));
  bool any = false;
  for (std::size_t k = 0; k < kNumCategories; ++k) {
    if (c.snapshot.current[t][k] == 0) continue;
    m += fmt::format(" {} {},", category_name(static_cast<Category>(k)),
                     format_bytes(c.snapshot.current[t][k]));
    any = true;
  }
  if (any) m.pop_back();
  else m += " nothing";
  if (!advice.empty()) {
    m += "\n  to make it fit:";
    for (const auto& a : advice) m += "\n    - " + a;
  }
  return m;
}

}  // namespace

OutOfMemory::OutOfMemory(OomContext ctx, std::vector<std::string> advice)
    : Error("memory", describe(ctx, advice)), ctx_(std::move(ctx)), advice_(std::move(advice)) {}

std::vector<std::string> default_oom_advice(const OomContext& c) {
  std::vector<std::string> a;
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
      a.push_back("shard optimizer state with zero_optimization.stage >= 1 across data-parallel "
                  "ranks, or move it off the device with zero_optimization.offload_optimizer."
                  "device = \"cpu\" or \"nvme\"");
    if (big(Category::grads))
      a.push_back("shard gradients with zero_optimization.stage >= 2");
    if (big(Category::params))
      a.push_back("shard parameters with zero_optimization.stage = 3, store them in 16 bits "
                  "(bf16.enabled or fp16.enabled), or offload them with "
                  "zero_optimization.offload_param.device = \"cpu\" or \"nvme\"");
    if (big(Category::comm))
      a.push_back("lower zero_optimization.reduce_bucket_size");
    a.push_back(fmt::format("or give the device tier at least {} (strata.memory.device_limit, "
                            "--device-memory)", format_bytes(total)));
  } else if (c.tier == Tier::host) {
    a.push_back("offload to NVMe instead of host memory (offload_optimizer.device / "
                "offload_param.device = \"nvme\") or lower offload buffer_count");
    a.push_back(fmt::format("or raise strata.memory.host_limit to at least {}", format_bytes(total)));
  } else {
    a.push_back(fmt::format("free disk space or raise strata.memory.nvme_limit to at least {}",
                            format_bytes(total)));
  }
  return a;
}

}  // namespace strata
