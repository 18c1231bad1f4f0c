#include "parallel/plan/auto_micro_batch.hpp"

#include "framework/memory/size.hpp"
#include "parallel/plan/oom_advice.hpp"

namespace strata::parallel::plan {

namespace {
constexpr std::int64_t kLargest = 1 << 16;  // no micro-batch beyond this is tried
}

std::optional<MemoryPlan> resolve_auto_micro_batch(config::Config& cfg, int ranks,
                                                   const ModelFactory& model) {
  if (!cfg.micro_batch_auto || cfg.train_micro_batch_size_per_gpu != 0 || cfg.train_batch_size != 0)
    return std::nullopt;
  if (!cfg.strata.memory.device_limit) return std::nullopt;  // config::resolve_batch says why
  auto plan_at = [&](std::int64_t m) {
    config::Config c = cfg;
    c.train_micro_batch_size_per_gpu = m;
    MemoryPlan p = plan_memory(c, model, PlanOptions{ranks, 2});
    return p;
  };
  MemoryPlan best = plan_at(1);
  if (!best.fits()) {
    config::Config one = cfg;
    one.train_micro_batch_size_per_gpu = 1;
    config::resolve_batch(one, config::data_parallel_size(one, ranks));
    const Tier t = !best.fits(Tier::device) ? Tier::device : !best.fits(Tier::host) ? Tier::host : Tier::nvme;
    const OomAdvice a = plan_advice(one, ranks, model, t, best.caps);
    std::string changes;
    for (const auto& c : a.changes) changes += "; " + c;
    user_fail("plan", "train_micro_batch_size_per_gpu is \"auto\" but not even micro-batch 1 fits: a "
              "step needs {} of {} memory (cap {}){}", format_bytes_ceil(best.peak(t)), tier_name(t),
              format_bytes(*best.caps[static_cast<int>(t)]), changes);
  }
  std::int64_t lo = 1, hi = 0;  // lo fits; hi (when set) does not
  while (hi == 0 && lo < kLargest) {
    MemoryPlan p = plan_at(2 * lo);
    if (!p.fits()) hi = 2 * lo;
    else lo *= 2, best = std::move(p);
  }
  while (hi != 0 && hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    MemoryPlan p = plan_at(mid);
    if (p.fits()) lo = mid, best = std::move(p);
    else hi = mid;
  }
  cfg.train_micro_batch_size_per_gpu = lo;
  cfg.notes.push_back(fmt::format(
      "auto: train_micro_batch_size_per_gpu = {}, the largest micro-batch whose step fits the "
      "caps (planned device peak {})", lo, format_bytes_ceil(best.peak(Tier::device))));
  return best;
}

}  // namespace strata::parallel::plan
