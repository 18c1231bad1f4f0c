#include "parallel/plan/trial.hpp"

#include <fmt/format.h>

#include "parallel/engine/training.hpp"

namespace strata::parallel::plan {

Caps caps_of(const config::Config& cfg) {
  return {cfg.strata.memory.device_limit, cfg.strata.memory.host_limit, cfg.strata.memory.nvme_limit};
}

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out, high;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    out.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  out.insert(out.end(), high.rbegin(), high.rend());
  return out;
}

std::optional<Trial> Trials::run(const config::Config& base, const Change& change) const {
  Trial t;
  t.change = change;
  try {
    t.cfg = apply(base, change);
  } catch (const UserError&) {
    return std::nullopt;  // not a valid config: not a candidate
  }
  // Nor is a change that a GPU job would refuse.
  if (!change.sets.empty() && t.cfg.strata.device == DeviceType::cuda && !gpu_refusal(t.cfg).empty())
    return std::nullopt;
  t.plan = plan_memory(t.cfg, model_, PlanOptions{ranks_, 2});
  t.plan.caps = caps_;
  return t;
}

std::optional<Trial> Trials::largest_micro(const config::Config& base, const Change& change,
                                           int below) const {
  const std::int64_t samples =
      base.train_micro_batch_size_per_gpu * std::max<std::int64_t>(1, base.gradient_accumulation_steps);
  std::vector<std::int64_t> micro;
  for (std::int64_t d : divisors(samples))
    if (below <= 0 || d < below) micro.push_back(d);
  auto at = [&](std::int64_t m) {
    Change c = change;
    c.sets.push_back(fmt::format("train_micro_batch_size_per_gpu={}", m));
    c.sets.push_back(fmt::format("gradient_accumulation_steps={}", samples / m));
    return run(base, c);
  };
  // Bisection for the last fitting index.
  std::optional<Trial> best;
  std::size_t lo = 0, hi = micro.size();  // answer in [lo, hi)
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    auto t = at(micro[mid]);
    if (t && t->fits()) {
      best = std::move(t);
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return best;
}

}  // namespace strata::parallel::plan
