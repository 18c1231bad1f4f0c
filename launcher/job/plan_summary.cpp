#include "launcher/job/plan_summary.hpp"

#include <fmt/format.h>

#include "framework/memory/size.hpp"

namespace strata::job {

namespace {
constexpr Tier kTiers[] = {Tier::device, Tier::host, Tier::nvme};
}

std::string plan_summary(const parallel::plan::MemoryPlan& plan) {
  std::string s = "plan       peak per rank, predicted before allocating (`strata plan` for the "
                  "breakdown):\n";
  for (const Tier t : kTiers) {
    if (plan.peak(t) == 0) continue;
    std::string parts;
    for (std::size_t c = 0; c < kNumCategories; ++c)
      if (const auto b = plan.peak(t, static_cast<Category>(c)); b > 0)
        parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ",
                             category_name(static_cast<Category>(c)), format_bytes(b));
    const auto& cap = plan.caps[static_cast<int>(t)];
    s += fmt::format("           {:<6} {} ({}){}\n", tier_name(t), format_bytes(plan.peak(t)),
                     parts,
                     cap ? fmt::format(" — cap {}: {}", format_bytes(*cap),
                                       plan.fits(t) ? "fits" : "does NOT fit")
                         : "");
  }
  return s;
}

std::string plan_versus_measured(const parallel::plan::MemoryPlan& plan,
                                 const std::array<std::uint64_t, kNumTiers>& measured) {
  std::string s = "peak per tier (the busiest rank, whole run): planned at start-up vs measured\n";
  for (const Tier t : kTiers) {
    const auto p = plan.peak(t), m = measured[static_cast<int>(t)];
    if (p == 0 && m == 0) continue;
    s += fmt::format("  {:<6} planned {:>12}  measured {:>12}  {}\n", tier_name(t),
                     format_bytes(p), format_bytes(m),
                     m > 0 ? fmt::format("{:+.2f}%", 100.0 * (static_cast<double>(p) -
                                                               static_cast<double>(m)) /
                                                          static_cast<double>(m))
                           : std::string("-"));
  }
  return s;
}

}  // namespace strata::job
